"""Compare the benchmarks of two source trees side by side: a base revision against the working checkout (or another
revision), run alternately, as ratios per pair.

    python benchmarks/compare.py                                  # a33036e against the working checkout, ~20 min
    python benchmarks/compare.py --base a33036e --new-rev 5b66910 # two committed revisions
    python benchmarks/compare.py --benchmarks perturbation mondrian --rounds 1

On a shared 2-core machine, wall times move with other load, so figures measured at another time say little.  This
tool never compares with old figures: it checks the base revision out with ``git worktree add`` into a temporary
folder (removed afterwards), runs each benchmark script of one tree, then the same script of the other, and repeats
that ``--rounds`` times, swapping which tree goes first every round.  Each run is a process of its own whose working
directory and ``PYTHONPATH`` are its tree, so it runs that tree's script on that tree's ``duckanon``; its figures are
read from the script's ``--json`` output.  Per case and figure, the table gives both trees' medians over the runs, the
ratio new/base of each pair (two runs back to back under about the same load) and their median, the median ratio of
CPU seconds, peak memory, and whether the results (classes, nodes checked, optimum, partitions, groups, ...) are the
same; below it, the 1-minute load average during each pair.  The table is printed and written to
``results/compare.md``.

The default configuration (``BENCHMARKS``) keeps every benchmark to what matters at a size one run of all of them
takes about three minutes: checks at 1M rows, search on Adult (DM, 0% and 5%) and on IHIS (Loss, 0%), Mondrian at 1M
(k 5, 10, 50), clustering on Adult (30,162 records, every method), perturbation at 1M.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402

RESULTS = HERE / "results" / "compare.md"
DEFAULT_BASE = "a33036e"  # main before issue 13


# ------------------------------------------------------------------ figures
@dataclass(frozen=True)
class Figure:
    """One figure of one case in one run of a benchmark script."""

    case: str
    name: str  # with its unit: "encode s", "nodes checked"
    value: float
    cpu: float | None = None  # process CPU seconds (all threads) beside a wall time
    peak_mb: float | None = None
    outcome: str | None = None  # what the case computed, to tell that both trees behave alike


def checks_figures(results: list[dict]) -> list[Figure]:
    figures = []
    for result in results:
        for entry in result["setups"]:
            setup = f"{result['rows']:,} {result['db']}, {len(entry['quasi_identifiers'])} QIs, " \
                    f"{entry['sensitive']} l={entry['l']}"
            if entry["vector"] == "bottom":  # encoding does not depend on the levels: once per setup
                figures.append(Figure(setup, "encode s", entry["encode"]["median"], entry["encode"]["median_cpu"],
                                      entry["encode_peak_rss_mb"], f"{entry['combos']:,} combos"))
            case = f"{setup}, {entry['vector']}"
            outcome = f"{entry['classes']:,} classes, {entry['violating_records']:,} violating"
            for name, timing in (("all 3 check s", entry["checks"]["all"]), ("end-to-end s", entry["end_to_end"])):
                figures.append(Figure(case, name, timing["median"], timing["median_cpu"], entry["peak_rss_mb"],
                                      outcome))
    return figures


def search_figures(results: list[dict]) -> list[Figure]:
    figures = []
    for result in results:
        case = f"{result['data']} {result['metric']} {result['suppression']:.0%}"
        runs = result["runs"]
        if not runs:  # stopped at the script's --timeout
            figures.append(Figure(case, "time s", float("nan"), outcome="stopped"))
            continue
        last = runs[-1]
        outcome = f"optimum {list(last['levels'].values())} = {last['value']:.10g}, {last['suppressed']} suppressed"
        peak = max(run["peak_rss_mb"] for run in runs)
        figures.append(Figure(case, "time s", statistics.median(run["wall"] for run in runs),
                              statistics.median(run["cpu"] for run in runs), peak, outcome))
        figures.append(Figure(case, "search s", statistics.median(run["search"] for run in runs), None, peak, outcome))
        # A figure, not part of the outcome: the same revision checks a node or two more or less from run to run
        # (IHIS, Loss 0%: 172 to 174), with the same optimum.
        figures.append(Figure(case, "nodes checked", statistics.median(run["checks"] for run in runs), None, peak,
                              outcome))
    return figures


def mondrian_figures(results: list[dict]) -> list[Figure]:
    figures = []
    for result in results:
        for entry in result["entries"]:
            case = f"{result['records']:,} k={entry['k']} {'relaxed' if entry['relaxed'] else 'strict'}"
            outcome = (f"{entry['rounds']} rounds, {entry['partitions']:,} partitions, LM {entry['lm']:.10g}, "
                       f"{entry['released_records']:,} released")
            peak = entry["peak_rss_mb"]
            figures += [Figure(case, "partition s", entry["partition_s"], None, peak, outcome),
                        Figure(case, "mondrian s", entry["mondrian_s"], entry["mondrian_cpu_s"], peak, outcome),
                        Figure(case, "with release s", entry["release_s"], entry["release_cpu_s"], peak, outcome)]
    return figures


def clustering_figures(results: list[dict]) -> list[Figure]:
    figures = []
    for result in results:
        case = f"{result['rows']:,} {result['method']}"
        outcome = f"{result['groups']} groups, NCP {result['ncp']:.10g}"
        figures.append(Figure(case, "cluster s", result["cluster_s"], result["cluster_cpu_s"], result["peak_rss_mb"],
                              outcome))
        if "publish_s" in result:
            figures.append(Figure(case, "publish s", result["publish_s"], result["publish_cpu_s"],
                                  result["peak_rss_mb"], outcome))
    return figures


def perturbation_figures(results: list[dict]) -> list[Figure]:
    return [Figure(f"{result['rows']:,} {case}", "wall s", statistics.median(run["wall"] for run in runs),
                   statistics.median(run["cpu"] for run in runs), max(run["peak_rss_mb"] for run in runs))
            for result in results for case, runs in result["runs"].items()]


@dataclass(frozen=True)
class Benchmark:
    """A benchmark script, the arguments it runs with, and how to read figures from its ``--json`` output.  In the
    arguments, ``{own}`` is a data folder of the tree's own (data built by the tree's duckanon) and ``{shared}`` one
    both trees use (data made by the benchmark harness, not by duckanon)."""

    name: str
    script: str
    args: tuple[str, ...]
    figures: Callable[[list[dict]], list[Figure]]


#: The default configuration: one run of all of them takes about three minutes on 2 cores, so three rounds of both
#: trees fit in about 20 minutes.
BENCHMARKS = (
    Benchmark("checks", "bench_checks.py",
              ("--rows", "1000000", "--db", "file", "--repeat", "5", "--slow-repeat", "3"), checks_figures),
    Benchmark("search-adult", "bench_search.py", ("--cases", "adult", "--repeat", "3"), search_figures),
    Benchmark("search-ihis", "bench_search.py",
              ("--cases", "ihis", "--metrics", "loss", "--suppression", "0.0", "--data-dir", "{shared}"),
              search_figures),
    Benchmark("mondrian", "bench_mondrian.py", ("--cases", "1000000", "--ks", "5", "10", "50", "--data-dir", "{own}"),
              mondrian_figures),
    Benchmark("clustering", "bench_clustering.py", ("--rows", "30162"), clustering_figures),
    Benchmark("perturbation", "bench_perturbation.py", ("--rows", "1000000", "--repeat", "1"), perturbation_figures),
)


# -------------------------------------------------------------------- trees
@dataclass
class Tree:
    side: str  # "base" or "new"
    path: Path
    label: str  # the revision, as the tables name it
    data: Path  # the tree's own data folder


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def checkout(revision: str, folder: Path) -> str:
    """Check ``revision`` out into ``folder`` as a detached worktree; its short hash."""
    git("worktree", "add", "--detach", str(folder), revision)
    return git("rev-parse", "--short", f"{revision}^{{commit}}")


def working_label() -> str:
    modified = git("status", "--porcelain", "--", "duckanon", "benchmarks")
    return f"{git('rev-parse', '--short', 'HEAD')} (working checkout{', modified' if modified else ''})"


def tree_environment(tree: Tree) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(tree.path))


def ready(tree: Tree) -> Path:
    """Compile the tree's bytecode (a fresh worktree has none, and compiling it inside one tree's first run would
    weigh on that tree only); where ``duckanon`` comes from in a process run as the benchmarks are, which must be the
    tree's own."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "duckanon", "benchmarks", "experiments"], cwd=tree.path,
                   check=True)
    out = subprocess.run([sys.executable, "-c", "import duckanon; print(duckanon.__file__)"], cwd=tree.path,
                         env=tree_environment(tree), capture_output=True, text=True, check=True).stdout.strip()
    path = Path(out).resolve()
    if tree.path.resolve() not in path.parents:
        raise SystemExit(f"{tree.side} tree {tree.path} imports duckanon from {path}, not its own")
    return path


# --------------------------------------------------------------------- runs
class LoadSampler:
    """The 1-minute load average, sampled every few seconds while a run lasts."""

    def __init__(self, every: float = 2.0):
        self.samples: list[float] = []
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self._every):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])


@dataclass
class Run:
    benchmark: str
    side: str
    pair: int
    seconds: float
    load: list[float]
    figures: list[Figure] = field(default_factory=list)
    error: str | None = None


def run_benchmark(benchmark: Benchmark, tree: Tree, pair: int, shared: Path, scratch: Path, timeout: float) -> Run:
    """One run of ``benchmark`` on ``tree``: the script's figures, or why there are none."""
    stem = scratch / f"{benchmark.name}-{tree.side}-{pair}"
    args = [arg.format(own=tree.data, shared=shared) for arg in benchmark.args]
    command = [sys.executable, str(tree.path / "benchmarks" / benchmark.script), *args,
               "--output", f"{stem}.md", "--json", f"{stem}.json"]
    common.progress(f"pair {pair}, {benchmark.name}: {tree.side} ({tree.label})")
    error = None
    with open(f"{stem}.log", "w") as log, LoadSampler() as load:
        started = time.perf_counter()
        # A session of its own, so that a run over time is stopped with the children it started.
        process = subprocess.Popen(command, cwd=tree.path, env=tree_environment(tree), stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            returncode, error = None, f"stopped after {timeout:g} s"
        seconds = time.perf_counter() - started
    # bench_clustering exits 1 when a target is missed; its figures are still written and still compared.
    result, figures = Path(f"{stem}.json"), []
    if error is None and not result.is_file():
        error = f"exit code {returncode}, no results"
    if error is None:
        try:
            figures = benchmark.figures(json.loads(result.read_text()))
        except (KeyError, TypeError, ValueError) as unknown:  # the tree's script writes other results
            error = f"results not understood: {unknown!r}"
    if error:
        tail = Path(f"{stem}.log").read_text().splitlines()[-15:]
        common.progress(f"  {benchmark.name} on {tree.side} failed ({error}):\n    " + "\n    ".join(tail))
    else:
        common.progress(f"  {seconds:.0f} s, load {statistics.mean(load.samples):.2f}")
    return Run(benchmark.name, tree.side, pair, seconds, load.samples, figures, error)


# -------------------------------------------------------------------- table
def ratio(new: float | None, base: float | None) -> float:
    return new / base if new is not None and base else float("nan")


def median(values: list[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def verdict(base: list[Figure | None], new: list[Figure | None]) -> str:
    """Whether both trees computed the same: every run's outcome of one equal to every run's of the other."""
    ran = [side for side, figures in (("base", base), ("new", new)) if any(figures)]
    if len(ran) < 2:
        return f"no run ({'base' if 'new' in ran else 'new'})" if ran else "no run"
    outcomes = [{f.outcome for f in figures if f and f.outcome} for figures in (base, new)]
    if not any(outcomes):
        return "–"
    if outcomes[0] != outcomes[1]:
        return "DIFFERS"
    return "same" if len(outcomes[0]) == 1 else "same (varies run to run)"


def comparison_table(runs: list[Run], pairs: int) -> tuple[str, list[str]]:
    """The table of one benchmark (its runs of both trees), and the outcomes of cases that differ."""
    by_run = {(run.side, run.pair): {(f.case, f.name): f for f in run.figures} for run in runs}
    keys = list(dict.fromkeys((f.case, f.name) for run in runs for f in run.figures))
    rows, differences, shown_case = [], [], None
    for case, name in keys:
        base = [by_run.get(("base", p), {}).get((case, name)) for p in range(1, pairs + 1)]
        new = [by_run.get(("new", p), {}).get((case, name)) for p in range(1, pairs + 1)]
        per_pair = [ratio(n.value, b.value) if b and n else float("nan") for b, n in zip(base, new)]
        cpu = [ratio(n.cpu, b.cpu) if b and n else float("nan") for b, n in zip(base, new)]
        peaks = [median([f.peak_mb for f in side if f and f.peak_mb is not None]) for side in (base, new)]
        said = ""
        if case != shown_case:  # the outcome belongs to the case: said on its first row
            said = verdict(base, new)
            if said in ("DIFFERS", "same (varies run to run)"):
                outcomes = ["; ".join(sorted({f.outcome for f in side if f and f.outcome})) for side in (base, new)]
                differences.append(f"- {case}: {said}; base {outcomes[0]} / new {outcomes[1]}")
        rows.append(["" if case == shown_case else case, name,
                     median([f.value for f in base if f]), median([f.value for f in new if f]),
                     " / ".join("–" if r != r else f"{r:.2f}" for r in per_pair), median(per_pair), median(cpu),
                     " → ".join("–" if p != p else f"{p:.0f}" for p in peaks), said])
        shown_case = case
    headers = ["case", "figure", "base", "new", "new/base per pair", "median ratio", "CPU ratio",
               "peak RSS MB base → new", "result"]
    return common.markdown_table(headers, rows), differences


def pairs_line(runs: list[Run], pairs: int) -> str:
    parts = []
    for pair in range(1, pairs + 1):
        both = [run for run in runs if run.pair == pair]  # in the order they ran
        samples = [s for run in both for s in run.load]
        if not samples:
            continue
        order = "base first" if pair % 2 else "new first"
        seconds = " + ".join(f"{run.side} {run.seconds:.0f} s" for run in both)
        failed = "".join(f"; {run.side} FAILED ({run.error})" for run in both if run.error)
        parts.append(f"{pair} ({order}; {seconds}): load {statistics.mean(samples):.2f} "
                     f"({min(samples):.2f}–{max(samples):.2f}){failed}")
    return "Pairs, with the 1-minute load average during each (mean, range): " + "; ".join(parts) + "."


def report(benchmarks: list[Benchmark], runs: list[Run], pairs: int, trees: dict[str, Tree], command: str,
           started: float, load_start: float) -> str:
    minutes = (time.perf_counter() - started) / 60
    sections = [
        "# Benchmarks compared: base against new, side by side",
        f"`{command}`",
        f"- base: {trees['base'].label}\n- new: {trees['new'].label}\n"
        f"- pairs of runs per benchmark: {pairs}, run alternately (base first in odd pairs, new first in even ones); "
        f"{minutes:.0f} minutes in all; {os.cpu_count()} cores ({common.machine_facts()['cpu']}); load average "
        f"{load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; "
        f"{dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}.\n"
        "- base / new: medians over the pairs of each tree's figure (seconds unless the figure says otherwise; each "
        "run's figure is the script's own median over its repeats); new/base per pair: the ratio of two runs back to "
        "back; CPU ratio: the median ratio of process CPU seconds (all threads), which other load moves less than "
        "wall time; peak RSS: medians; result: `same` when every run of both trees computed the same (combos and "
        "classes, the optimum, rounds, partitions and LM, groups and NCP; `–` where the script reports none).",
    ]
    for benchmark in benchmarks:
        mine = [run for run in runs if run.benchmark == benchmark.name]
        table, differences = comparison_table(mine, pairs)
        sections.append(f"## {benchmark.name}\n\n`{benchmark.script} {' '.join(benchmark.args)}`\n\n{table}\n\n"
                        f"{pairs_line(mine, pairs)}")
        if differences:
            sections.append("Outcomes:\n\n" + "\n".join(differences))
    return "\n\n".join(sections) + "\n"


# --------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    names = [b.name for b in BENCHMARKS]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=DEFAULT_BASE, help=f"the base revision (default {DEFAULT_BASE})")
    parser.add_argument("--new-rev", default=None, help="compare this revision instead of the working checkout")
    parser.add_argument("--benchmarks", nargs="+", choices=names, default=names)
    parser.add_argument("--rounds", type=int, default=3, help="pairs of runs per benchmark (default 3)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before one run is stopped")
    parser.add_argument("--output", type=Path, default=RESULTS, help="markdown results file")
    parser.add_argument("--json", type=Path, default=None, help="also write every run's figures as JSON")
    args = parser.parse_args(argv)
    command = "python benchmarks/compare.py " + " ".join(argv if argv is not None else sys.argv[1:])
    benchmarks = [b for b in BENCHMARKS if b.name in args.benchmarks]

    started, load_start = time.perf_counter(), common.load_at_start()
    with tempfile.TemporaryDirectory(prefix="duckanon-compare-") as folder:
        folder = Path(folder)
        for name in ("base-data", "new-data", "shared-data", "runs"):
            (folder / name).mkdir()
        worktrees = []
        try:
            worktrees.append(folder / "base-tree")
            trees = {"base": Tree("base", worktrees[-1], checkout(args.base, worktrees[-1]), folder / "base-data")}
            if args.new_rev:
                worktrees.append(folder / "new-tree")
                trees["new"] = Tree("new", worktrees[-1], checkout(args.new_rev, worktrees[-1]), folder / "new-data")
            else:
                trees["new"] = Tree("new", ROOT, working_label(), folder / "new-data")
            for tree in trees.values():
                common.progress(f"{tree.side}: {tree.label}, duckanon from {ready(tree)}")
            runs = []
            for pair in range(1, args.rounds + 1):
                order = ("base", "new") if pair % 2 else ("new", "base")
                for benchmark in benchmarks:
                    runs += [run_benchmark(benchmark, trees[side], pair, folder / "shared-data", folder / "runs",
                                           args.timeout) for side in order]
        finally:
            for worktree in worktrees:
                if worktree.exists():
                    git("worktree", "remove", "--force", str(worktree))
    text = report(benchmarks, runs, args.rounds, trees, command, started, load_start)
    print(text)
    common.write_text(args.output, text)
    common.progress(f"wrote {args.output}")
    if args.json:
        common.write_text(args.json, json.dumps([{**run.__dict__, "figures": [f.__dict__ for f in run.figures]}
                                                 for run in runs], indent=1))
    return 1 if any(run.error for run in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
