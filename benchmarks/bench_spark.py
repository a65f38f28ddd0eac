"""DuckDB against Spark ``local[2]``: the same duckanon calls on Adult resampled to 10 and 100 million records.

    python benchmarks/bench_spark.py [--sizes 10000000 100000000] [--engines duckdb spark]
                                     [--steps check search mondrian release] [--timeout 2700]
                                     [--data-dir benchmarks/.data] [--output benchmarks/results/spark_scale.md]

The source of every step is the Parquet file ``<data-dir>/adult_<n>.parquet`` (Adult resampled with noise to ``n``
records; it must exist), given to duckanon as a path, so that each step reads it afresh on either engine.  Each
(engine, size) runs in a process of its own, DuckDB then Spark for each size, one process at a time.  DuckDB is an
in-memory connection with its default settings (threads = cores, memory_limit 80 % of RAM; only its spill folder is
moved to a temporary one).  Spark is ``local[2]`` with an 8 GB driver, 8 shuffle partitions and its UI on loopback
port 4050, driven through :class:`duckanon.engine.spark_engine.SparkEngine`.

The policy: k-anonymity (k = 10) over eight quasi-identifiers with ARX hierarchies (sex, age, race, marital-status,
education, native-country, workclass, occupation), ``salary-class`` sensitive, the other columns dropped, 5 %
suppression.  The steps, in this order, each one call of the same API on both engines:

- start: opening the engine (``duckdb.connect()``; for Spark, starting the session and its JVM);
- check: ``anon.check(path, policy, levels)`` at sex 0, age 2, race 0, the others 1 (reads the source once into a
  frequency table, then checks);
- search: ``anon.search(path, policy)``, optimal full-domain search by loss (reads the source into its frequency table,
  then searches in process);
- mondrian: ``anon.mondrian(path, mondrian_policy)``, strict Mondrian with age numeric (no hierarchy), k = 10;
- mondrian + release: ``anon.mondrian(path, mondrian_policy, "<tmp>/release.parquet")``, the same and the release
  written and verified (one Parquet file on DuckDB, a folder of parts on Spark); where it raises, the row says so.

Per step:

- wall s: wall seconds of the call; tree CPU s: CPU seconds (user + system) of the benchmark process and every
  process under it (Spark's JVM and its Python workers), a steadier figure than wall time on a loaded machine;
- peak MB: the highest sum of resident sets of the process and all its descendants (Spark's JVM is a child of the
  Python process), sampled with psutil every 0.2 s during the step (shared pages are counted once per process);
- jobs, shuffles, shuffle write/read MB (Spark only): from Spark's UI REST API on loopback, each step being a job group
  of its own (``setJobGroup``): the jobs of the group, its completed stages that wrote shuffle output, and the sum of
  their ``shuffleWriteBytes`` / ``shuffleReadBytes``;
- result and agree: what the step computed (check: its summary; search: the best node and its loss; Mondrian: the
  partitions, suppressed records and LM; release: records written and suppressed), and whether both engines computed
  the same (the same ``summary()`` text, best node and loss, partitions and suppressed);
- Spark/DuckDB: the ratio of wall seconds.

A process still running after ``--timeout`` seconds (default 45 minutes) is stopped with everything it started; the
steps it finished keep their figures (the child writes them as it goes), the one it was in is recorded as a timeout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's duckanon, not an installed one
sys.path.insert(0, str(HERE))

import common  # noqa: E402

QUASI_IDENTIFIERS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
LEVELS = {"sex": 0, "age": 2, "race": 0, "marital-status": 1, "education": 1, "native-country": 1, "workclass": 1,
          "occupation": 1}
SENSITIVE = "salary-class"
K = 10
SUPPRESSION = 0.05
SIZES = [10_000_000, 100_000_000]
ENGINES = ["duckdb", "spark"]
STEPS = ["check", "search", "mondrian", "release"]
STEP_NAMES = {"start": "start", "check": "check", "search": "search", "mondrian": "mondrian",
              "release": "mondrian + release"}
TIMEOUT = 45 * 60
UI_PORT = 4050
SAMPLE_SECONDS = 0.2
RESULTS = HERE / "results" / "spark_scale.md"
DATA_DIR = HERE / ".data"


def data_path(data_dir: Path, rows: int) -> Path:
    return data_dir / f"adult_{rows}.parquet"


# -------------------------------------------------------- the process tree
class TreeSampler:
    """The peak of the summed resident sets of this process and all its descendants, sampled in a thread."""

    def __init__(self, interval: float = SAMPLE_SECONDS):
        import psutil

        self.psutil, self.interval = psutil, interval
        self.root = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tree(self) -> list:
        try:
            return [self.root, *self.root.children(recursive=True)]
        except self.psutil.Error:
            return [self.root]

    def rss(self) -> int:
        total = 0
        for process in self.tree():
            try:
                total += process.memory_info().rss
            except self.psutil.Error:  # ended between the listing and the reading
                pass
        return total

    def cpu(self) -> dict[int, float]:
        """CPU seconds (user + system) of every process of the tree, by pid."""
        seconds = {}
        for process in self.tree():
            try:
                times = process.cpu_times()
                seconds[process.pid] = times.user + times.system
            except self.psutil.Error:
                pass
        return seconds

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeSampler:
        self.peak = self.rss()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())


def cpu_spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the tree spent between two readings (a process started in between counts from zero; one that
    ended in between is lost, which Spark's long-lived JVM is not)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


# ------------------------------------------------------------ Spark's UI
class SparkUI:
    """Jobs and stages of one application, read from Spark's UI REST API on loopback."""

    def __init__(self, spark):
        port = urlparse(spark.sparkContext.uiWebUrl).port if spark.sparkContext.uiWebUrl else UI_PORT
        self.base = f"http://localhost:{port}/api/v1/applications/{spark.sparkContext.applicationId}"

    def get(self, what: str):
        with urllib.request.urlopen(f"{self.base}/{what}", timeout=60) as response:
            return json.load(response)

    def group(self, group: str, settle: float = 15.0) -> dict:
        """The jobs of ``group`` and the shuffles of their completed stages.  The UI learns of a job's end from the
        listener bus, after the call returned: read until no job of the group runs and two readings agree."""
        deadline = time.monotonic() + settle
        previous = None
        while True:
            jobs = [j for j in self.get("jobs") if j.get("jobGroup") == group]
            state = sorted((j["jobId"], j["status"]) for j in jobs)
            if (state == previous and all(j["status"] != "RUNNING" for j in jobs)) or time.monotonic() > deadline:
                break
            previous = state
            time.sleep(0.5)
        stage_ids = {s for j in jobs for s in j.get("stageIds", [])}
        stages = [s for s in self.get("stages?status=complete") if s["stageId"] in stage_ids]
        return {
            "jobs": len(jobs),
            "failed_jobs": sum(j["status"] == "FAILED" for j in jobs),
            "stages": len(stages),
            "shuffles": sum(s.get("shuffleWriteBytes", 0) > 0 for s in stages),
            "shuffle_write_bytes": sum(s.get("shuffleWriteBytes", 0) for s in stages),
            "shuffle_read_bytes": sum(s.get("shuffleReadBytes", 0) for s in stages),
            "tasks": sum(s.get("numTasks", 0) for s in stages),
        }


# ------------------------------------------------------------------- child
def policies():
    from duckanon import Hierarchy, KAnonymity, Policy
    from duckanon.datasets import adult_hierarchy_dir

    folder = adult_hierarchy_dir()
    hierarchies = {q: Hierarchy.from_arx_csv(folder / f"{q}.csv") for q in QUASI_IDENTIFIERS}
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(K)], sensitive=[SENSITIVE], others="drop",
                    suppression_limit=SUPPRESSION)
    mondrian = Policy(quasi_identifiers={"age": None, **{q: hierarchies[q] for q in QUASI_IDENTIFIERS if q != "age"}},
                      models=[KAnonymity(K)], sensitive=[SENSITIVE], others="drop")
    return policy, mondrian


def open_engine(engine: str, workdir: Path):
    """The anonymizer and, on Spark, the session."""
    import duckdb

    import duckanon

    if engine == "duckdb":
        con = duckdb.connect()
        # In memory, DuckDB spills to ./.tmp: a temporary folder instead (its memory_limit stays the default).
        con.execute(f"SET temp_directory = '{workdir / 'duckdb_tmp'}'")
        return duckanon.connect(con), None
    from duckanon.engine.spark_engine import SparkEngine, spark_session

    spark = spark_session("local[2]", **{
        "spark.driver.memory": "8g", "spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "true",
        "spark.ui.port": str(UI_PORT), "spark.sql.warehouse.dir": str(workdir / "warehouse"),
        "spark.local.dir": str(workdir / "spark_local"),
        # Mondrian and the search run many jobs: keep them all in the UI's store, to read their shuffles.
        "spark.ui.retainedJobs": "100000", "spark.ui.retainedStages": "100000",
        "spark.sql.ui.retainedExecutions": "100000"})
    spark.sparkContext.setLogLevel("WARN")
    return duckanon.connect(SparkEngine(spark, scratch=str(workdir / "scratch"))), spark


def run_step(step: str, anon, source: str, workdir: Path) -> tuple[dict, str | None]:
    """Run one step: what it computed (a fingerprint to compare engines by, and a short text)."""
    policy, mondrian_policy = policies()
    if step == "check":
        report = anon.check(source, policy, LEVELS)
        return {"summary": report.summary()}, (f"{report.classes:,} classes, {report.violating_records:,} violating, "
                                               f"{'holds' if report.within_limit else 'fails'}")
    if step == "search":
        result = anon.search(source, policy)
        best = result.best
        if best is None:
            return {"best": None}, "no solution"
        loss = best.values.get("loss")
        return ({"node": list(best.node), "loss": loss, "suppressed": best.suppressed},
                f"node {''.join(map(str, best.node))}, loss {loss:.4f}, {result.checks} checks")
    if step == "mondrian":
        result = anon.mondrian(source, mondrian_policy)
        metrics = result.metrics
        return ({"partitions": result.partitioning.partitions, "suppressed": metrics.get("suppressed"),
                 "lm": metrics["loss"]},
                f"{result.partitioning.partitions:,} partitions, {metrics.get('suppressed', 0):,.0f} suppressed, "
                f"LM {metrics['loss']:.4f}")
    if step == "release":
        path = workdir / "release.parquet"
        try:
            result = anon.mondrian(source, mondrian_policy, str(path))
            release = result.release
            return ({"partitions": result.partitioning.partitions, "records_out": release.records_out,
                     "suppressed": release.suppressed},
                    f"{release.records_out:,} records written, {release.suppressed:,} suppressed, "
                    f"{_size_mb(path):.0f} MB")
        finally:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            elif path.exists():
                path.unlink()
    raise ValueError(f"unknown step {step!r}")


def _size_mb(path: Path) -> float:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20
    return path.stat().st_size / 2**20


def child(engine: str, rows: int, steps: list[str], data_dir: Path, workdir: Path, output: Path) -> None:
    """Run the steps of one (engine, size), writing the results to ``output`` after each (so that a timeout keeps
    what was done)."""
    source = str(data_path(data_dir, rows))
    result = {"engine": engine, "rows": rows, "facts": common.machine_facts(), "steps": [], "running": "start"}

    def save() -> None:
        result["load_average_end"] = common.machine_facts()["load_average"]
        output.write_text(json.dumps(result, indent=1))

    save()
    sampler = TreeSampler()
    cpu0 = sampler.cpu()
    with sampler:
        wall, _, (anon, spark) = common.timed(lambda: open_engine(engine, workdir))
    result["steps"].append({"step": "start", "wall": wall, "cpu": cpu_spent(cpu0, sampler.cpu()),
                            "peak_mb": sampler.peak / 2**20})
    if spark is not None:
        result["facts"]["spark"] = spark.version
        result["facts"]["spark_conf"] = {k: v for k, v in sorted(spark.sparkContext.getConf().getAll())
                                         if k in ("spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions",
                                                  "spark.sql.adaptive.enabled")}
        ui = SparkUI(spark)
    else:
        result["facts"]["duckdb_threads"] = anon.con.execute("SELECT current_setting('threads')").fetchone()[0]
        result["facts"]["duckdb_memory_limit"] = anon.con.execute(
            "SELECT current_setting('memory_limit')").fetchone()[0]
    anon.progress = common.progress
    for step in steps:
        result["running"] = step
        save()
        common.progress(f"{engine} {rows:,}: {STEP_NAMES[step]}")
        if spark is not None:
            spark.sparkContext.setJobGroup(step, STEP_NAMES[step])
        entry = {"step": step}
        cpu0 = sampler.cpu()
        started = time.perf_counter()
        try:
            with sampler:
                fingerprint, text = run_step(step, anon, source, workdir)
            entry.update(fingerprint=fingerprint, result=text)
        except Exception as error:  # noqa: BLE001 - recorded in the table, the next step still runs
            message = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
            entry.update(error=message, traceback=traceback.format_exc())
            common.progress(f"{engine} {rows:,}: {STEP_NAMES[step]} failed: {message}")
            traceback.print_exc()
        entry.update(wall=time.perf_counter() - started, cpu=cpu_spent(cpu0, sampler.cpu()),
                     peak_mb=sampler.peak / 2**20)
        if spark is not None:
            spark.sparkContext.setJobGroup("idle", "between steps")
            try:
                entry.update(ui.group(step))
            except Exception as error:  # noqa: BLE001 - the figures are missing, the timing stands
                entry["ui_error"] = f"{type(error).__name__}: {error}"
        common.progress(f"{engine} {rows:,}: {STEP_NAMES[step]} {entry['wall']:.1f} s, peak {entry['peak_mb']:.0f} MB"
                        + (f", {entry.get('shuffles', '?')} shuffles" if spark is not None else "")
                        + (f": {entry['result']}" if "result" in entry else ""))
        result["steps"].append(entry)
    result["running"] = None
    save()
    if spark is not None:
        spark.stop()


# ------------------------------------------------------------------ parent
HEADERS = ["rows", "engine", "step", "wall s", "tree CPU s", "peak MB", "jobs", "shuffles", "shuffle write MB",
           "shuffle read MB", "result", "agree", "Spark/DuckDB"]


def run_case(engine: str, rows: int, steps: list[str], data_dir: Path, timeout: float) -> dict:
    """One (engine, size) in a process of its own; what it wrote, with a timeout or a failure recorded."""
    with tempfile.TemporaryDirectory(prefix=f"duckanon-bench-spark-{engine}-") as tmp:
        output = Path(tmp) / "result.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--child-output", str(output), "--workdir", tmp,
                   "--engines", engine, "--sizes", str(rows), "--steps", *steps, "--data-dir", str(data_dir)]
        common.progress(f"{engine} {rows:,}: starting (timeout {timeout:g} s)")
        measured = common.run_measured(command, timeout=timeout, env=common.checkout_environment())
        result = json.loads(output.read_text()) if output.exists() else {"engine": engine, "rows": rows, "steps": []}
    result["child_wall"] = measured.wall
    running = result.get("running")
    if measured.returncode is None or measured.returncode != 0:
        why = (f"timeout after {timeout:g} s" if measured.returncode is None
               else f"process failed (exit code {measured.returncode})")
        common.progress(f"{engine} {rows:,}: {why} during {running}")
        done = {s["step"] for s in result["steps"]}
        for step in ["start", *steps]:
            if step not in done:
                result["steps"].append({"step": step, "error": why if step == running else f"not run ({why})"})
    return result


def same(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, float) and isinstance(y, float):
            if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12):
                return False
        elif x != y:
            return False
    return True


def agreement(results: list[dict]) -> dict[tuple[int, str], str]:
    """Per (rows, step): whether DuckDB and Spark computed the same."""
    by = {(r["rows"], r["engine"], s["step"]): s for r in results for s in r["steps"]}
    verdicts = {}
    for rows, _, step in by:
        duck, spark = by.get((rows, "duckdb", step)), by.get((rows, "spark", step))
        if step == "start" or duck is None or spark is None:
            continue
        if "fingerprint" not in duck or "fingerprint" not in spark:
            verdicts[(rows, step)] = "–"
        elif same(duck["fingerprint"], spark["fingerprint"]):
            verdicts[(rows, step)] = "yes"
        else:
            verdicts[(rows, step)] = "NO"
    return verdicts


def ratio(results: list[dict], rows: int, step: str) -> float | None:
    walls = {r["engine"]: s.get("wall") for r in results if r["rows"] == rows for s in r["steps"]
             if s["step"] == step and "error" not in s}
    if walls.get("duckdb") and walls.get("spark"):
        return walls["spark"] / walls["duckdb"]
    return None


def table_rows(results: list[dict]) -> list[list]:
    verdicts = agreement(results)
    rows = []
    for r in results:
        spark = r["engine"] == "spark"
        for s in r["steps"]:
            failed = "error" in s
            mb = lambda key: s[key] / 2**20 if spark and key in s else "–"  # noqa: E731
            quotient = ratio(results, r["rows"], s["step"]) if spark and s["step"] != "start" else None
            rows.append([
                f"{r['rows']:,}", r["engine"], STEP_NAMES[s["step"]],
                s["wall"] if "wall" in s else "–", s["cpu"] if "cpu" in s else "–",
                f"{s['peak_mb']:.0f}" if "peak_mb" in s else "–",
                s.get("jobs", "–") if spark else "–", s.get("shuffles", "–") if spark else "–",
                mb("shuffle_write_bytes"), mb("shuffle_read_bytes"),
                s["error"].replace("|", "\\|") if failed else s.get("result", ""),
                verdicts.get((r["rows"], s["step"]), "–"),
                f"{quotient:.1f}x" if quotient is not None else "–",
            ])
    return rows


def totals(results: list[dict], steps: list[str]) -> list[str]:
    """Per size: the Spark/DuckDB ratio of every step and of their sum."""
    lines = []
    for rows in sorted({r["rows"] for r in results}):
        parts = [f"{STEP_NAMES[s]} {q:.1f}x" for s in steps if (q := ratio(results, rows, s)) is not None]
        sums = {}
        for r in (r for r in results if r["rows"] == rows):
            ok = [s for s in r["steps"] if s["step"] in steps and "error" not in s]
            if len(ok) == len(steps):
                sums[r["engine"]] = sum(s["wall"] for s in ok)
        total = (f"; all steps {sums['spark']:.0f} s against {sums['duckdb']:.0f} s, "
                 f"{sums['spark'] / sums['duckdb']:.1f}x" if len(sums) == 2 else "")
        if parts:
            lines.append(f"- {rows:,} rows, Spark/DuckDB wall time: {', '.join(parts)}{total}.")
    return lines


def spark_facts(results: list[dict]) -> str:
    for r in results:
        facts = r.get("facts", {})
        if "spark" in facts:
            conf = ", ".join(f"{k}={v}" for k, v in facts.get("spark_conf", {}).items())
            return f"- spark: {facts['spark']} ({conf})"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="records (adult_<n>.parquet must exist)")
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=ENGINES)
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=STEPS)
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds per (engine, size) process")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child-output", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child_output is not None:
        (engine,), (rows,) = args.engines, args.sizes
        child(engine, rows, args.steps, args.data_dir, args.workdir, args.child_output)
        return 0

    for rows in args.sizes:
        if not data_path(args.data_dir, rows).exists():
            parser.error(f"no {data_path(args.data_dir, rows)}")
    load = common.load_at_start()
    common.progress(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    started = time.perf_counter()
    results = []
    for rows in args.sizes:
        for engine in args.engines:
            results.append(run_case(engine, rows, args.steps, args.data_dir, args.timeout))
            print(common.markdown_table(HEADERS, table_rows(results)), flush=True)
    elapsed = time.perf_counter() - started
    table = common.markdown_table(HEADERS, table_rows(results))
    lines = [
        f"- One process per (engine, size), run one after the other ({', '.join(args.engines)} for each size); "
        f"{elapsed / 60:.0f} minutes in all. Source: `{args.data_dir}/adult_<n>.parquet`, read afresh by every step.",
        "- Policy: k-anonymity, k = 10, over sex, age, race, marital-status, education, native-country, workclass, "
        f"occupation (ARX hierarchies), salary-class sensitive, others dropped, 5 % suppression; check at "
        f"{', '.join(f'{q} {l}' for q, l in LEVELS.items())}; Mondrian strict with age numeric.",
        "- wall s: one run each. tree CPU s: CPU of the process and all its descendants (Spark's JVM included). "
        "peak MB: highest summed RSS of the process tree, sampled every 0.2 s during the step; on Spark mostly the "
        "JVM's heap, which grows towards the 8 GB driver memory before it collects and may give memory back between "
        "steps, so it says how big the heap was let grow more than what the step needed.",
        "- jobs / shuffles / shuffle MB: Spark UI REST API, per job group: jobs of the step, completed stages with "
        "shuffle write > 0, and the sums of their shuffle write and read bytes.",
        "- agree: same check summary text, same best node and loss, same partitions and suppressed records (and "
        "records written) on both engines.",
        *totals(results, args.steps),
    ]
    if spark_facts(results):
        lines.append(spark_facts(results))
    for r in results:
        if "load_average_end" in r:
            lines.append(f"- {r['engine']} {r['rows']:,}: load average at the end {r['load_average_end']}.")
    command = "python benchmarks/bench_spark.py " + " ".join(argv if argv is not None else sys.argv[1:])
    for r in results:  # the tracebacks stay in the JSON only
        for s in r["steps"]:
            if "traceback" in s:
                common.progress(f"{r['engine']} {r['rows']:,} {s['step']}:\n{s['traceback']}")
    common.report("DuckDB against Spark local[2], Adult resampled to 10M and 100M records", command, table,
                  "\n".join(lines), results, load, args.output, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
