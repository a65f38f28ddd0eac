"""Shared helpers for the benchmarks: timing, peak memory, machine facts, markdown tables, child processes.

Only the standard library (psutil is used when installed, never required), so a benchmark runs wherever duckanon does.

Peak memory is the process's resident-set high-water mark.  On Linux it can be reset (``/proc/self/clear_refs``
with ``5``), which resets both ``VmHWM`` and ``getrusage(RUSAGE_SELF).ru_maxrss``; a benchmark resets it before a
step and reads it after, to get that step's peak.  Where the reset is refused the peak is the process's since start, so
run each size in its own process (:func:`run_child`) to keep sizes apart.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_START = time.perf_counter()
# ARX's ARXPopulationModel.Region.USA, the population its k-map and population-uniqueness cases estimate from.
USA_POPULATION = 317_238_626


# ------------------------------------------------------------------ progress
def progress(message: str) -> None:
    """One line on stderr, stamped with seconds since the process started."""
    print(f"[{time.perf_counter() - _START:7.1f}s] {message}", file=sys.stderr, flush=True)


# -------------------------------------------------------------------- timing
@dataclass
class Timing:
    """Wall and CPU seconds (CPU of every thread of the process, DuckDB's included) of repeated runs."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def add(self, wall: float, cpu: float) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)

    @property
    def median(self) -> float:
        return statistics.median(self.wall) if self.wall else float("nan")

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu) if self.cpu else float("nan")

    @property
    def best(self) -> float:
        return min(self.wall) if self.wall else float("nan")

    def as_dict(self) -> dict:
        return {"wall": self.wall, "cpu": self.cpu, "median": self.median, "median_cpu": self.median_cpu,
                "best": self.best}


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Run ``fn()`` once: (wall seconds, process CPU seconds, result)."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = fn()
    return time.perf_counter() - wall0, time.process_time() - cpu0, result


def measure(fn: Callable[[], Any], repeat: int, timing: Timing | None = None) -> tuple[Timing, Any]:
    """Run ``fn`` ``repeat`` times into ``timing`` (a new one unless given); the last result."""
    timing = timing if timing is not None else Timing()
    result = None
    for _ in range(repeat):
        wall, cpu, result = timed(fn)
        timing.add(wall, cpu)
    return timing, result


# -------------------------------------------------------------------- memory
_MAXRSS_UNIT = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux


def peak_rss_mb() -> float:
    """The process's resident-set high-water mark (since start or the last :func:`reset_peak_rss`), in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * _MAXRSS_UNIT / 2**20


def current_rss_mb() -> float:
    try:
        import psutil
        return psutil.Process().memory_info().rss / 2**20
    except ImportError:
        pass
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def reset_peak_rss() -> bool:
    """Reset the high-water mark to the current RSS (Linux); False where the system refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def duckdb_memory_mb(con) -> dict[str, float]:
    """DuckDB's own accounting: ``duckdb_memory()`` by tag (MiB, nonzero only) and its total."""
    rows = con.execute("SELECT tag, memory_usage_bytes FROM duckdb_memory() WHERE memory_usage_bytes > 0").fetchall()
    usage = {tag: round(b / 2**20, 1) for tag, b in rows}
    usage["total"] = round(sum(b for _, b in rows) / 2**20, 1)
    return usage


def database_size(con) -> dict[str, Any]:
    """``PRAGMA database_size`` of the current database as a dict."""
    cursor = con.execute("PRAGMA database_size")
    names = [d[0] for d in cursor.description]
    row = cursor.fetchone()
    return dict(zip(names, row)) if row else {}


# ------------------------------------------------------------- machine facts
def machine_facts(con=None) -> dict[str, Any]:
    """What a reader needs to compare figures: cores, CPU, memory, load, versions, date, commit."""
    import duckdb

    facts: dict[str, Any] = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gb": _memory_gb(),
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a",
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "platform": platform.platform(),
        "commit": _git_commit(),
    }
    try:
        import duckanon
        facts["duckanon"] = duckanon.__version__
    except ImportError:
        pass
    if con is not None:
        facts["duckdb_threads"] = con.execute("SELECT current_setting('threads')").fetchone()[0]
        facts["duckdb_memory_limit"] = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    return facts


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> float | str:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return "unknown"


def _git_commit() -> str:
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "duckanon"], cwd=root, capture_output=True,
                               text=True, timeout=10).stdout.strip()
        return f"{commit}{' (duckanon/ modified)' if dirty else ''}" if commit else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ------------------------------------------------------------------- output
def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "| " + " | ".join("-" * w for w in widths) + " |", *map(line, cells[1:])])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "–"
        return f"{value:.3f}" if value < 10 else f"{value:.2f}" if value < 100 else f"{value:.0f}"
    return str(value)


def facts_markdown(facts: dict[str, Any]) -> str:
    return "\n".join(f"- {key}: {value}" for key, value in facts.items())


def write_text(path: str | os.PathLike, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ----------------------------------------------------------- child processes
def checkout_environment() -> dict[str, str]:
    """This process's environment with the checkout first on ``PYTHONPATH``, so that a child imports its
    ``duckanon``."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_child(script: str | os.PathLike, args: Sequence[str], timeout: float | None = None) -> dict:
    """Run ``python script --child-output FILE *args`` (so memory of one size does not leak into the next) and
    return the JSON it wrote.  The child's stderr (its progress) passes through.  A child still running after
    ``timeout`` seconds is killed and :class:`TimeoutError` raised."""
    with tempfile.TemporaryDirectory(prefix="duckanon-bench-") as tmp:
        out = Path(tmp) / "result.json"
        try:
            completed = subprocess.run([sys.executable, str(script), "--child-output", str(out), *args],
                                       env=checkout_environment(), timeout=timeout)
        except subprocess.TimeoutExpired as expired:  # subprocess.run has killed the child
            raise TimeoutError(f"benchmark child {' '.join(args)} ran over {timeout:g} s") from expired
        if completed.returncode != 0:
            raise SystemExit(f"benchmark child {' '.join(args)} failed with exit code {completed.returncode}")
        return json.loads(out.read_text())


@dataclass
class Measured:
    """A child process's exit code, wall seconds, and its peak resident set (MiB: the highest of the process and of
    the children it waited for, as the kernel reports it on exit); ``started`` is the wall clock (epoch seconds) just
    before it was started."""

    returncode: int | None  # None: stopped at the timeout
    wall: float
    peak_rss_mb: float
    started: float


def run_measured(command: Sequence[str], *, timeout: float | None = None, env: dict[str, str] | None = None,
                 cwd: str | os.PathLike | None = None, stdout=None, stderr=None) -> Measured:
    """Run ``command`` to its end and measure it, whatever it runs (a JVM, a Python child): the kernel's resource
    usage of that very process (``wait4``) gives its peak RSS without polling.  ``stdout``/``stderr``: open files to
    write to (inherited when None).  A process still running after ``timeout`` seconds is killed with the processes
    it started, and its ``returncode`` is None."""
    started = time.time()
    wall0 = time.perf_counter()
    # A session of its own, so that a timeout stops whatever the command started too.
    process = subprocess.Popen(list(command), env=env, cwd=cwd, stdout=stdout, stderr=stderr, start_new_session=True)
    stopped = threading.Event()

    def stop() -> None:
        stopped.set()
        os.killpg(process.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, stop) if timeout is not None else None
    if timer is not None:
        timer.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)
    finally:
        if timer is not None:
            timer.cancel()
    wall = time.perf_counter() - wall0
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    return Measured(None if stopped.is_set() else process.returncode, wall, usage.ru_maxrss * _MAXRSS_UNIT / 2**20,
                    started)


# A load average from which other processes are said to inflate wall times.
LOADED = 0.5


ARX_COMMON = Path(__file__).resolve().parent / "arx_common" / "ArxCsv.java"


def arx_classpath(arx: Path, data_dir: Path, driver: Path) -> str:
    """The class path that runs ``driver`` (an ARX benchmark driver's ``.java``): ARX 3.9.2's jars in ``arx`` and the
    driver compiled with ``arx_common/ArxCsv.java`` into ``data_dir`` (again when either changed)."""
    jars = [arx / "arx-3.9.2-core.jar", *sorted((arx / "lib").glob("*.jar"))]
    classpath = ":".join(map(str, jars))
    classes = data_dir / f"arx-classes-{driver.stem}"
    compiled = classes / f"{driver.stem}.class"
    if not compiled.is_file() or compiled.stat().st_mtime < max(driver.stat().st_mtime, ARX_COMMON.stat().st_mtime):
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(classes), "-cp", classpath, str(driver),
                        str(ARX_COMMON)], check=True)
    return f"{classes}:{classpath}"


def load_at_start() -> float:
    """The load average before a benchmark starts (said when other processes use the CPU)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load >= LOADED:
        progress(f"load average {load:.2f} before starting: other processes use the CPU, so wall times will be "
                 "inflated; compare the CPU seconds too")
    return load


def report(title: str, command: str, table: str, note_text: str, results: Sequence[dict], load: float, output,
           json_path) -> None:
    """Print the results table and notes, and write them with the machine facts (those of the first case that ran,
    with the load average at the start and after the last case) and the raw results as JSON."""
    ran = [r for r in results if "facts" in r]
    facts = dict(ran[0]["facts"]) if ran else machine_facts()
    facts["load_average_start"] = f"{load:.2f}"
    end = ""
    if ran:
        facts["load_average_end"] = ran[-1]["load_average_end"]
        end = f", {facts['load_average_end']} at the end"
    if load >= LOADED:
        note_text += (f"\n- Other processes were using the CPU (load average {load:.2f} at the start{end}, on "
                      f"{os.cpu_count()} cores): wall times are inflated and noisy.")
    print(table)
    print()
    print(note_text)
    write_text(output, f"# {title}\n\n`{command.strip()}`\n\n{table}\n\n{note_text}\n\n"
                       f"## Machine\n\n{facts_markdown(facts)}\n")
    progress(f"wrote {output}")
    if json_path:
        write_text(json_path, json.dumps(results, indent=1))

