"""How long perturbing and publishing takes: seed 004's synthesis on 1M and 10M records of Agrawal's nine attributes.

    python benchmarks/bench_perturbation.py [--rows 1000000 10000000] [--repeat 3] [--bins 100]

For each row count (each in its own process, so memory figures stay apart) the script generates ``n`` records with
``duckanon.datasets.agrawal.generate_agrawal`` (nine numeric attributes and F1's label, in a DuckDB file in a temporary folder;
timed, not part of the figures), checkpoints, and measures, as medians of ``--repeat`` runs (one run at 10M and
above):

- synthesis: ``anon.perturb(table, path, method=EmpiricalSynthesis(bins), numeric=<the nine>, insensitive=["class"],
  measure=False)`` —
  keying the records, reading the nine attributes, synthesizing and re-associating them, writing the release file
  and verifying it: the issue's figure (target: under 5 s at 1M records); its stages from the progress messages;
- synthesis + measures: the same with the disclosure measures (default: on a random sample of 200,000 records);
- Gaussian noise: ``AdditiveNoise("gaussian", snr=10)`` without measures, for comparison;
- the peer, pandas by hand: read the table into a DataFrame, the same synthesis with NumPy per column (histogram, CDF,
  inverse by interpolation, ``rank(method="first")`` for re-association), write a DuckDB file from the DataFrame — what
  a user would write without duckanon (no random tie-breaking, no verification, no measures).

Peak RSS is the process's resident-set high-water mark, reset before each step, so it includes the source table's
share of DuckDB's buffer pool and the NumPy arrays.  Wall seconds are the figures; CPU seconds (all threads) are kept
beside them because wall time moves with other load on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's duckanon, not an installed one
sys.path.insert(0, str(HERE))

import common  # noqa: E402
import duckdb  # noqa: E402
import numpy as np  # noqa: E402

import duckanon  # noqa: E402
from duckanon import AdditiveNoise, EmpiricalSynthesis  # noqa: E402
from duckanon.datasets.agrawal import ATTRIBUTES, generate_agrawal  # noqa: E402

TABLE = "applicants"
TARGETS = {1_000_000: 5.0}
RESULTS = HERE / "results" / "perturbation.md"
CASES = ("synthesis", "synthesis + measures", "gaussian noise", "pandas by hand (peer)")


class Stages:
    """A progress callback that keeps how long each stage took."""

    def __init__(self):
        self.marks: list[tuple[str, float]] = []

    def __call__(self, message: str) -> None:
        self.marks.append((message, time.perf_counter()))
        common.progress(f"    {message}")

    def durations(self, end: float) -> dict[str, float]:
        ends = [t for _, t in self.marks[1:]] + [end]
        return {message.split(" ")[0]: finish - start for (message, start), finish in zip(self.marks, ends)}


def pandas_by_hand(con, path: str, bins: int, seed: int) -> None:
    frame = con.execute(f'SELECT * FROM "{TABLE}"').df()
    rng = np.random.default_rng(seed)
    for column in ATTRIBUTES:
        values = frame[column].to_numpy(dtype=float)
        points = np.linspace(values.min(), values.max(), bins)
        counts = np.bincount(np.searchsorted(points, values), minlength=bins)
        counts[counts == 0] = 1
        draws = np.sort(np.interp(rng.random(len(values)), np.cumsum(counts) / counts.sum(), points))
        frame[column] = draws[frame[column].rank(method="first").to_numpy(dtype=np.int64) - 1]
    with duckdb.connect(path) as out:
        out.register("frame", frame)
        out.execute("CREATE TABLE release AS SELECT * FROM frame")


def child(n: int, repeat: int, bins: int) -> dict:
    workdir = tempfile.mkdtemp(prefix="duckanon-bench-perturb-")
    try:
        con = duckdb.connect(os.path.join(workdir, "source.duckdb"))
        common.progress(f"{n:,} rows: generating Agrawal's data")
        build, _, _ = common.timed(lambda: generate_agrawal(con, TABLE, n, functions=1, seed=0))
        con.execute("CHECKPOINT")
        common.progress(f"{n:,} rows: generated in {build:.1f} s")
        numeric = list(ATTRIBUTES)
        runs = {case: [] for case in CASES}
        for run in range(repeat):
            for case in CASES:
                target = os.path.join(workdir, f"release-{run}.duckdb")
                stages = Stages()
                anon = duckanon.connect(con, progress=stages)
                if case == "pandas by hand (peer)":
                    work = lambda: pandas_by_hand(con, target, bins, run)  # noqa: E731
                else:
                    method = AdditiveNoise("gaussian", 10) if case == "gaussian noise" else EmpiricalSynthesis(bins)
                    work = lambda: anon.perturb(TABLE, target, method=method, numeric=numeric,  # noqa: E731
                                                insensitive=["class"], seed=run,
                                                measure=case == "synthesis + measures")
                common.progress(f"{n:,} rows, run {run + 1}/{repeat}: {case}")
                common.reset_peak_rss()
                wall, cpu, _ = common.timed(work)
                runs[case].append({"wall": wall, "cpu": cpu, "peak_rss_mb": common.peak_rss_mb(),
                                   "stages": stages.durations(time.perf_counter())})
                for leftover in (target, target + ".wal"):
                    if os.path.exists(leftover):
                        os.remove(leftover)
        facts = common.machine_facts(con)
        con.close()
        return {"rows": n, "bins": bins, "build_s": build, "runs": runs, "facts": facts,
                "load_average_end": common.machine_facts()["load_average"]}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


HEADERS = ["rows", "case", "wall s", "CPU s", "peak RSS MB", "stages (s)", "target"]


def median(values):
    return float(np.median(values))


def table_rows(results: list[dict]) -> list[list]:
    rows = []
    for result in results:
        n = result["rows"]
        for case, runs in result["runs"].items():
            stages = {}
            for key in runs[0]["stages"]:
                stages[key] = median([r["stages"].get(key, 0.0) for r in runs])
            shown = ", ".join(f"{key} {seconds:.2f}" for key, seconds in stages.items()) or "–"
            wall = median([r["wall"] for r in runs])
            target = TARGETS.get(n)
            verdict = "–" if target is None or case != "synthesis" else \
                f"< {target:g} s: {'met' if wall < target else 'MISSED'}"
            rows.append([f"{n:,}", case, wall, median([r["cpu"] for r in runs]),
                         f"{max(r['peak_rss_mb'] for r in runs):.0f}", shown, verdict])
    return rows


def notes(results: list[dict]) -> str:
    lines = [
        f"- Data: Agrawal et al.'s generator, nine numeric attributes (salary, commission, age, elevel, car, zipcode, "
        f"hvalue, hyears, loan) and F1's label, in a DuckDB file; all nine perturbed, the label kept. "
        f"EmpiricalSynthesis(bins={results[0]['bins']}); seeds differ per run.",
        "- Stages (from the progress messages): keying = copying the source into a temporary table with two seeded "
        "hashes of each record; reading = the facts query (counts, NULLs, fingerprints) and fetching the keys and the "
        "nine attributes as NumPy arrays, put in the keys' random order; perturbing = synthesis and rank "
        "re-association (attributes in parallel threads); measuring = the disclosure measures; writing = the release "
        "query (a join by key) into the file, and its verification.",
        "- Peak RSS: the process's high-water mark during the step (reset before it), all runs' maximum.",
    ]
    for result in results:
        runs = len(next(iter(result["runs"].values())))
        lines.append(f"- {result['rows']:,} rows: generated in {result['build_s']:.1f} s (not in the figures); "
                     f"medians of {runs} run(s); load average at the end {result['load_average_end']}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per case below 10M rows (median); one at 10M+")
    parser.add_argument("--bins", type=int, default=100, help="EmpiricalSynthesis bins (the paper's k)")
    parser.add_argument("--output", type=Path, default=RESULTS, help="markdown results file")
    parser.add_argument("--json", type=Path, default=None, help="also write every raw measurement as JSON")
    parser.add_argument("--child-output", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child_output is not None:
        (n,) = args.rows
        args.child_output.write_text(json.dumps(child(n, args.repeat, args.bins)))
        return 0

    load = common.load_at_start()
    results = [common.run_child(__file__, ["--rows", str(n), "--repeat", str(args.repeat if n < 10_000_000 else 1),
                                           "--bins", str(args.bins)]) for n in args.rows]
    table = common.markdown_table(HEADERS, table_rows(results))
    note_text = notes(results)
    command = (f"python benchmarks/bench_perturbation.py --rows {' '.join(map(str, args.rows))} "
               f"--repeat {args.repeat} --bins {args.bins}")
    common.report("Perturbation benchmark", command, table, note_text, results, load, args.output, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
