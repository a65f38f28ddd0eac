"""duckanon's full-domain search beside ARX 3.9.2, interleaved in one run: issue 14's benchmark table.

    python benchmarks/bench_arx.py                                  # every case, 3 pairs (hours: IHIS at 5 % is slow)
    python benchmarks/bench_arx.py --cases adult cold --pairs 1     # a few minutes
    python benchmarks/bench_arx.py --cases ihis-dm-0 --evaluator sql --json out.json
    python benchmarks/bench_arx.py --cases scale --scale-rows 10000000 100000000

Cases (k-anonymity, k = 5, nine quasi-identifiers, optimal full-domain search):

- ``adult-dm-0``, ``adult-dm-5``, ``adult-loss-5``: the 30,162 complete Adult records (sex, age, race,
  marital-status, education, native-country, workclass, occupation, salary-class; 12,960 nodes), DM at 0 % and 5 %
  suppression, Loss at 5 %.  duckanon reads its bundled data; ARX the same records written by the ARX driver's
  ``prep_adult.py``.
- ``ihis-dm-0``, ``ihis-loss-5``, ``ihis-dm-5``: 1,193,504 IHIS-shaped records (``ihis/generate.py``, ARX's IHIS
  hierarchies; 25,920 nodes), both tools reading the same generated CSV.
- ``adult-…``/``ihis-…`` with a model's name: ARX's privacy models (``ArxModels.java``), ARX's suppression semantics
  on both sides; ``ihis-tenth-…`` anonymize a tenth of IHIS drawn once (119,651 records), which both tools read.
- ``scale``: Adult drawn with replacement to each of ``--scale-rows`` (default 10M and 100M) records, written once
  as Parquet; DM at 5 %, duckanon alone (ARX holds its data in the JVM's heap), searching the Parquet file itself:
  the call's time, its encoding (reading the file into the frequency table) and its search apart, and peak memory.
- ``cold``: the README's main command (``duckanon -o adult_release.duckdb``: the bundled Adult job, eight
  quasi-identifiers, k = 5, 5 %, Loss) from process start to the release written and verified, against a fresh ARX
  JVM's process start to its first result (loading the same records, then one ``anonymize()`` of the same policy).
  duckanon runs from a virtual environment the checkout is installed into as the README installs it (``pip install
  .``: compiled bytecode, the core dependencies only), not from the checkout.

``--pairs`` rounds (default 3): in each, every case runs ARX and duckanon back to back, which one goes first swapping
every round, and the 1-minute load average is sampled while the pair runs.  Both tools run in processes of their own
whose peak RSS the kernel reports (``wait4``): ARX's JVM (``arx-bench``: data loaded once, ``--warmups`` untimed
calls of ``anonymize()``, the first of which compiles ARX's code, then the timed ones) and a duckanon child (data
loaded once into DuckDB and encoded once with ``anon.encode``, as ARX keeps the data it loaded and encoded;
``--warmups`` untimed calls of ``anon.search`` on it, then the timed ones; then one full call on the table, reading and
encoding it again, reported beside).  Each tool's figure in a pair is the median of its timed calls: 5 on Adult, 1 on IHIS
(``--calls`` sets them all).  Data is prepared once into
``--data-dir`` (default ``benchmarks/.data/``, not committed) and reused.  ARX cases need the ARX driver
(``--arx``, default ``../shared/peers/arx`` beside the checkout) and Java 17; without them they are skipped.

The table (printed and written to ``results/arx.md``; ``--json`` keeps every run) gives per case the medians,
duckanon/ARX per pair with the load, peak memory, nodes checked, whether both found the same optimum, the issue's ARX
figure and target, and whether it is met.  The exit code is 1 when a run failed.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # the checkout's duckanon, not an installed one
sys.path.insert(0, str(HERE))

import common  # noqa: E402
import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from bench_search import (  # noqa: E402
    ADULT_QIS,
    IHIS_DIR,
    IHIS_QIS,
    K,
    adult_table,
    ihis_file,
    ihis_table,
)
from compare import LoadSampler  # noqa: E402

import duckanon  # noqa: E402
from duckanon import (  # noqa: E402
    AverageReidentificationRisk,
    BasicBetaLikeness,
    DeltaDisclosurePrivacy,
    DeltaPresence,
    EnhancedBetaLikeness,
    EntropyLDiversity,
    Hierarchy,
    JournalistProfitability,
    KAnonymity,
    KMap,
    Policy,
    PopulationUniqueness,
    ProsecutorProfitability,
    SampleUniqueness,
    TCloseness,
    datasets,
)
from duckanon.cli.parser import build_parser  # noqa: E402
from duckanon.cli.policy_options import bundled_defaults  # noqa: E402
from duckanon.search.run import EVALUATORS  # noqa: E402

RESULTS = HERE / "results" / "arx.md"
DATA_DIR = HERE / ".data"
DEFAULT_ARX = ROOT.parent / "shared" / "peers" / "arx"
#: The README's main command, without the installation in front of it.
MAIN_COMMAND = ["-o", "adult_release.duckdb"]
DEFAULT_SCALE_ROWS = [10_000_000, 100_000_000]
#: The issue's targets for a search over records drawn from Adult: rows → (seconds, MiB).
SCALE_TARGETS = {100_000_000: (300.0, 8 * 1024)}
#: ARX's metric for each of duckanon's: the same DM (non-monotonic: Σ|E|² over kept classes + n per suppressed
#: record); ARX's Loss is a geometric mean over the attributes (gs = 0.5), duckanon's a sum of averages.
ARX_METRICS = {"dm": "dm", "loss": "loss", "dm-star": "dmstar", "arx-loss": "loss", "arx-entropy": "entropy",
               "arx-nm-entropy": "nm-entropy", "arx-ebil": "ebil", "arx-ambiguity": "ambiguity"}
#: Metrics both tools define alike, so that their optima must have the same value.
ALIKE = {"dm", "dm-star", "arx-loss", "arx-entropy", "arx-nm-entropy", "arx-ebil", "arx-ambiguity"}
#: duckanon's driver of ARX's models beyond k-anonymity (compiled against ARX's jars on first use).
MODELS_DRIVER = HERE / "arx_models" / "ArxModels.java"


# -------------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # "warm": both tools' warm calls; "cold": both processes from their start; "scale": duckanon alone
    data: str  # "adult", "ihis" or "parquet" (Adult drawn to ``rows`` records)
    metric: str
    suppression: float
    arx_figure: str = "–"  # the (or the ARX driver's README's) figure on this machine
    ratio_target: float | None = None  # duckanon/ARX at most
    memory_target_mb: float | None = None  # duckanon's peak RSS below
    seconds_target: float | None = None  # duckanon's call below
    rows: int | None = None
    calls: int = 1  # timed calls per process (after the warm-ups)
    # Privacy models (as ArxModels.java names them) over ``sensitive``, both tools with ARX's suppression semantics;
    # none: k-anonymity with k = K, duckanon in its default replace mode.
    models: tuple[str, ...] = ()
    sensitive: str | None = None
    # The models compare a sample with its population (δ-presence, k-map): the data is the population and the records
    # anonymized are "arx" (ARX's research subset of Adult, data/adult_subset.csv) or "tenth" (a tenth drawn once,
    # seeded); both tools read the same sample file.
    sample: str | None = None
    # The sample alone is the data (no population): a smaller instance of the same data, where the whole would take
    # either tool longer than a run can wait.
    sample_alone: bool = False

    @property
    def with_arx(self) -> bool:
        return self.kind != "scale"

    @property
    def same_optimum_required(self) -> bool:
        """Where both tools define the metric alike, their optima must be the same node with the same value."""
        return self.kind == "warm" and self.metric in ALIKE

    def target(self) -> str:
        parts = []
        if self.ratio_target is not None:
            parts.append(f"≤ {self.ratio_target:g}× ARX")
        if self.seconds_target is not None:
            parts.append(f"< {self.seconds_target / 60:g} min")
        if self.memory_target_mb is not None:
            parts.append(f"< {self.memory_target_mb / 1024:g} GB")
        if self.same_optimum_required:
            parts.append("same optimum")
        return ", ".join(parts) or "–"


WARM_CASES = [
    # ARX's warm calls on Adult still speed up for a few calls as its code is compiled further: 5 timed calls each.
    Case("adult-dm-0", "warm", "adult", "dm", 0.0, "56–86 ms", ratio_target=0.5, calls=5),
    Case("adult-dm-5", "warm", "adult", "dm", 0.05, "1.1 s quiet; 2.6–4.7 s loaded", ratio_target=0.5, calls=5),
    Case("adult-loss-5", "warm", "adult", "loss", 0.05, "2.3–4.1 s loaded", ratio_target=0.5, calls=5),
    Case("ihis-dm-0", "warm", "ihis", "dm", 0.0, "16 s quiet; 26–58 s loaded", ratio_target=0.3,
         memory_target_mb=2048),
    Case("ihis-loss-5", "warm", "ihis", "loss", 0.05, "199 s, 4.6 GB (duckanon before: 28 s)", ratio_target=0.1,
         memory_target_mb=2048),
    Case("ihis-dm-5", "warm", "ihis", "dm", 0.05, "– (duckanon before: 271 s)", ratio_target=0.1,
         memory_target_mb=2048),
]
# ARX's models beyond k-anonymity, in configurations of ARX's own test cases (benchmarks/arx_cases/adult_cases.json:
# TCloseness#0, BLikeness#0 and #1) and alike ones on IHIS-shaped records; ARX's figure is the one measured here.
MODEL_CASES = [
    Case("adult-t-equal-4", "warm", "adult", "dm-star", 0.04, models=("t-equal:0.2", "k:5"), sensitive="occupation",
         calls=3),
    Case("adult-beta-basic-50", "warm", "adult", "arx-loss", 0.5, models=("basic-beta:3",), sensitive="occupation",
         calls=3),
    Case("adult-beta-enhanced-0", "warm", "adult", "arx-loss", 0.0, models=("enhanced-beta:2",),
         sensitive="occupation", calls=5),
    Case("adult-delta-disclosure-4", "warm", "adult", "arx-loss", 0.04, models=("delta-disclosure:1.5", "k:5"),
         sensitive="occupation", calls=3),
    # Shannon's entropy: with Grassberger's, ARX's check stops at the first partial sum above its bound, in the
    # order of its hash buckets, though the sum can fall again (G(1) < 0), so its verdicts are not the estimate's.
    Case("adult-entropy-l-4", "warm", "adult", "arx-nm-entropy", 0.04, models=("entropy-l:3", "k:5"),
         sensitive="occupation", calls=3),
    Case("adult-delta-presence-5", "warm", "adult", "arx-loss", 0.05, models=("delta-presence:0.05:0.15",),
         sample="arx", calls=3),
    Case("adult-k-map-5", "warm", "adult", "arx-loss", 0.05, models=("k-map:10",), sample="arx", calls=3),
    Case("adult-ebil-4", "warm", "adult", "arx-ebil", 0.04, models=("k:5",), calls=3),
    Case("adult-ambiguity-4", "warm", "adult", "arx-ambiguity", 0.04, models=("k:5",), calls=3),
    # Risk thresholds, as ARX's TestAnonymizationRiskBased #0, #1, #2 and #3 (nine quasi-identifiers)
    Case("adult-average-risk-4", "warm", "adult", "arx-nm-entropy", 0.04, models=("average-risk:0.01",), calls=3),
    Case("adult-sample-uniqueness-4", "warm", "adult", "arx-loss", 0.04, models=("sample-uniqueness:0.01",),
         calls=3),
    Case("adult-population-uniqueness-dankar-4", "warm", "adult", "arx-nm-entropy", 0.04,
         models=("population-uniqueness:0.0001:dankar:15",), calls=1),
    Case("adult-population-uniqueness-zayatz-4", "warm", "adult", "arx-loss", 0.04,
         models=("population-uniqueness:0.0001:zayatz:15",), calls=1),
    # Profitability with an attack, as ARX's TestAnonymizationProfitability #2 (its getConfig1, the prosecutor, at
    # 4 % here) and #5 (the journalist on ARX's research subset, getConfig4)
    Case("adult-profitability-4", "warm", "adult", "arx-ebil", 0.04, models=("profitability:20:120:3000:1200",),
         calls=3),
    Case("adult-profitability-journalist-4", "warm", "adult", "arx-ebil", 0.04,
         models=("profitability-journalist:20:1000:3000:120",), sample="arx", calls=3),
    Case("ihis-average-risk-5", "warm", "ihis", "dm-star", 0.05, models=("average-risk:0.02",)),
    Case("ihis-profitability-5", "warm", "ihis", "dm-star", 0.05, models=("profitability:20:120:3000:1200",)),
    Case("ihis-t-equal-5", "warm", "ihis", "dm-star", 0.05, models=("t-equal:0.2", "k:5"), sensitive="EDUC"),
    Case("ihis-beta-basic-5", "warm", "ihis", "dm-star", 0.05, models=("basic-beta:1", "k:5"), sensitive="EDUC"),
    Case("ihis-delta-presence-5", "warm", "ihis", "dm-star", 0.05, models=("delta-presence:0.0:0.2",),
         sample="tenth"),
    Case("ihis-k-map-5", "warm", "ihis", "dm-star", 0.05, models=("k-map:50",), sample="tenth"),
    # The models over EDUC and profitability on a tenth of IHIS (the sample above, as the data): on all 1.19M records
    # (1.17M distinct) duckanon's search under basic β-likeness ran past 30 minutes, ARX's under profitability past 23.
    *(Case(f"ihis-tenth-{name}", "warm", "ihis", "dm-star", 0.05, models=models, sensitive=sensitive,
           sample="tenth", sample_alone=True)
      for name, models, sensitive in (("t-equal-5", ("t-equal:0.2", "k:5"), "EDUC"),
                                      ("beta-basic-5", ("basic-beta:1", "k:5"), "EDUC"),
                                      ("profitability-5", ("profitability:20:120:3000:1200",), None))),
]
RISK_THRESHOLDS = ("average-risk", "sample-uniqueness", "population-uniqueness")
COLD_CASE = Case("cold", "cold", "adult", "loss", 0.05, "duckanon 0.7–0.9× ARX (issue 30)", ratio_target=0.4)
GROUPS = {"adult": [c.name for c in WARM_CASES if c.data == "adult"],
          "ihis": [c.name for c in WARM_CASES if c.data == "ihis"], "scale": ["scale"], "cold": ["cold"],
          "models": [c.name for c in MODEL_CASES]}


def scale_case(rows: int) -> Case:
    seconds, memory = SCALE_TARGETS.get(rows, (None, None))
    return Case(f"scale-{rows}", "scale", "parquet", "dm", 0.05, seconds_target=seconds, memory_target_mb=memory,
                rows=rows)


def chosen_cases(names: list[str], scale_rows: list[int]) -> list[Case]:
    wanted = {name for given in names for name in GROUPS.get(given, [given])}
    cases = [c for c in [*WARM_CASES, *MODEL_CASES] if c.name in wanted]
    if "scale" in wanted:
        cases += [scale_case(rows) for rows in scale_rows]
    if "cold" in wanted:
        cases.append(COLD_CASE)
    return cases


def case_named(name: str) -> Case:
    if name.startswith("scale-"):
        return scale_case(int(name.removeprefix("scale-")))
    return next(c for c in [*WARM_CASES, *MODEL_CASES, COLD_CASE] if c.name == name)


@dataclass(frozen=True)
class MainJob:
    """What the README's main command runs on the bundled data, as the command line itself sets it up."""

    quasi_identifiers: list[str]
    k: int
    suppression: float
    metric: str


def main_job() -> MainJob:
    args = build_parser().parse_args(["search", *MAIN_COMMAND])
    bundled_defaults(args)
    return MainJob([q for q, _ in args.qi], args.k, args.suppression_limit, args.metric)


# --------------------------------------------------------------------- data
@dataclass
class Settings:
    arx: Path | None  # the ARX driver's folder; None: ARX cases are skipped
    data_dir: Path
    evaluator: str
    warmups: int
    calls: int | None  # timed calls per process; None: each case's own
    timeout: float
    scratch: Path  # the processes' output

    @property
    def installed(self) -> Path:
        """The virtual environment the cold case installs the checkout into, as the README's main command does."""
        return self.scratch / "readme-venv"

    def calls_of(self, case: Case) -> tuple[int, int]:
        """Untimed and timed calls of ``case`` per process: a scale case's figure is a user's first call."""
        if case.kind == "scale":
            return 0, 1
        return self.warmups, self.calls or case.calls


def cached(path: Path, make, what: str) -> Path:
    """``path``, made first by ``make(partial)`` when missing: made under another name and renamed when complete, so
    an interrupted preparation is never taken for a finished one."""
    if path.exists():
        common.progress(f"{what}: {path} (cached)")
        return path
    partial = path.with_name(path.name + ".partial")
    if partial.is_dir():
        shutil.rmtree(partial)
    elif partial.exists():
        partial.unlink()
    common.progress(f"{what}: preparing {path}")
    seconds, _, _ = common.timed(lambda: make(partial))
    partial.rename(path)
    common.progress(f"{what}: ready in {seconds:.1f} s")
    return path


def adult_csv(data_dir: Path) -> Path:
    """The 30,162 complete Adult records as ARX reads them (comma-separated, header row)."""
    return data_dir / "adult_complete.csv"


def ihis_dir(data_dir: Path) -> Path:
    """The folder of the generated IHIS-shaped CSV, which both tools read."""
    return data_dir / "ihis"


def parquet_path(data_dir: Path, rows: int) -> Path:
    return data_dir / f"adult_{rows}.parquet"


def write_resampled(path: Path, rows: int) -> None:
    """Adult's complete records drawn with replacement to ``rows`` records (no noise: every value stays one that the
    hierarchies cover), written as Parquet by DuckDB through a database file in the same folder, which can spill."""
    with tempfile.TemporaryDirectory(prefix="resample-", dir=path.parent) as folder:
        # The draws' order means nothing: DuckDB need not keep it.
        con = duckdb.connect(str(Path(folder) / "resample.duckdb"), config={"preserve_insertion_order": False})
        try:
            datasets.resample_adult(con, rows, "adult", noise=False)
            con.table("adult").write_parquet(str(path))
        finally:
            con.close()


SAMPLE_SEED = 26


def sample_path(data_dir: Path, case: Case) -> Path:
    """The folder holding a case's sample: ``sample.csv`` (the population's file's header and the sampled lines, as
    ARX reads them) and ``positions.json`` (their 0-based record numbers, by which duckanon takes the same rows)."""
    return data_dir / f"sample-{case.data}-{case.sample}"


def write_sample(case: Case, population: Path, folder: Path) -> None:
    if case.sample == "arx":  # ARX's research subset, matched to Adult's records as ARX matches them
        from bench_arx_cases import arx_subset_rows  # noqa: PLC0415 - a benchmark's helper, needed here only
        con = duckdb.connect()
        datasets.load_adult(con, "adult")
        positions = arx_subset_rows(duckanon.connect(con))
    else:
        with population.open(encoding="utf-8") as file:
            records = sum(1 for _ in file) - 1
        draw = np.random.default_rng(SAMPLE_SEED).random(records)
        positions = np.flatnonzero(draw < 0.1).tolist()
    folder.mkdir()
    wanted = set(positions)
    with population.open(encoding="utf-8") as source, (folder / "sample.csv").open("w", encoding="utf-8") as out:
        out.write(next(source))
        out.writelines(line for number, line in enumerate(source) if number in wanted)
    (folder / "positions.json").write_text(json.dumps(positions))


def prepare(cases: list[Case], settings: Settings) -> None:
    """The cases' data, made once into ``settings.data_dir``."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if settings.arx is not None and any(c.with_arx for c in cases):  # the driver's first run reads Adult too
        cached(adult_csv(settings.data_dir), lambda partial: subprocess.run(
            [sys.executable, str(settings.arx / "prep_adult.py"), str(partial)], check=True, stdout=subprocess.DEVNULL),
            "Adult CSV for ARX")
    if any(c.data == "ihis" for c in cases):
        cached(ihis_dir(settings.data_dir), ihis_file, "IHIS-shaped CSV")
    for case in cases:
        if case.sample is not None:
            population = data_file(case, settings)
            cached(sample_path(settings.data_dir, case), lambda partial, c=case, f=population: write_sample(
                c, Path(f), partial), f"the {case.sample} sample of {case.data}")
    for case in cases:
        if case.kind == "scale":
            cached(parquet_path(settings.data_dir, case.rows), lambda partial, n=case.rows: write_resampled(partial, n),
                   f"Adult drawn to {case.rows:,} records")


def first_runs(cases: list[Case], settings: Settings) -> None:
    """One untimed run of each process that pairs will time from its start, so that none is the first to read its
    files from disk; a tool that does not run stops the benchmark here."""
    if settings.arx is not None and any(c.with_arx for c in cases):
        # Compiles the driver when needed, and reads the JVM's and the jars' files once before anything is timed.
        common.progress("ARX driver: a first run (compiles it when needed)")
        run = arx_run(WARM_CASES[0], settings, 0, 1, label="setup")
        if run["error"]:
            raise SystemExit(f"the ARX driver does not run: {run['error']}")
    if any(c.kind == "cold" for c in cases):
        install_as_readme(settings.installed)
        common.progress("duckanon's main command: a first run (untimed)")
        run = duckanon_cold(settings, label="setup")
        if run["error"]:
            raise SystemExit(f"duckanon's main command does not run: {run['error']}")


def adult_hierarchies() -> dict[str, Hierarchy]:
    folder = datasets.adult_hierarchy_dir()
    return {q: Hierarchy.from_arx_csv(folder / f"{q}.csv", name=q) for q in ADULT_QIS}


# -------------------------------------------------------------- duckanon child
def child(case: Case, evaluator: str, warmups: int, timed: int, data_dir: Path) -> dict:
    """In a process of its own: the data loaded once, ``warmups`` untimed calls, then ``timed`` ones."""
    con = duckdb.connect()
    if case.data == "adult":
        load_s, _, (source, hierarchies) = common.timed(lambda: adult_table(con))
        rows = con.table(source).shape[0]
    elif case.data == "ihis":
        load_s, _, (source, hierarchies) = common.timed(lambda: ihis_table(con, ihis_dir(data_dir)))
        rows = con.table(source).shape[0]
    else:  # the search reads the Parquet file itself: reading it is part of the call
        source, hierarchies, load_s = parquet_path(data_dir, case.rows), adult_hierarchies(), 0.0
        rows = con.read_parquet(str(source)).shape[0]
    population = None
    if case.sample is not None:  # the loaded table is the population (or not used); the sample's rows are anonymized
        loaded, source = source, f"{source}_sample"
        population = None if case.sample_alone else loaded
        positions = json.loads((sample_path(data_dir, case) / "positions.json").read_text())
        with con.cursor() as cursor:
            cursor.register("positions", pd.DataFrame({"position": positions}))
            cursor.execute(f'CREATE TABLE "{source}" AS SELECT * EXCLUDE (position) FROM (SELECT *, rowid AS '
                           f'position FROM "{loaded}") WHERE position IN (SELECT position FROM positions)')
        rows = con.table(source).shape[0]
    common.progress(f"{case.name}: {rows:,} records, loaded in {load_s:.1f} s")
    moments: list[tuple[float, str]] = []
    anon = duckanon.connect(con, progress=lambda message: moments.append((time.perf_counter(), message)))
    policy = Policy(quasi_identifiers={q: h for q, h in hierarchies.items() if q != case.sensitive},
                    models=duckanon_models(case, population), suppression_limit=case.suppression, others="insensitive",
                    suppression="replace-unchecked" if case.models else "replace")
    # As ARX's warm calls search the data it loaded and encoded once, the warm calls search the source encoded once
    # (anon.encode); one full call (reading and encoding the source again) is timed besides.  The Parquet cases
    # time full calls only: a user's one call on the file.
    encoded = None
    if case.data != "parquet":
        encode_s, _, encoded = common.timed(lambda: anon.encode(source, policy))
        common.progress(f"{case.name}: encoded once in {encode_s:.2f} s")
    calls = []
    for call in range(warmups + timed + (encoded is not None)):
        full = encoded is None or call == warmups + timed
        moments.clear()
        common.reset_peak_rss()
        started = time.perf_counter()
        wall, cpu, result = common.timed(lambda: anon.search(
            source if full else encoded, policy if full else None, metric=case.metric, evaluator=evaluator))
        # Everything before the search proper: reading the source, encoding it, building the node evaluator.
        encode = next((t - started for t, m in moments if " search over " in m), float("nan"))
        chosen = next((m for _, m in moments if m.startswith("evaluating nodes")), "")  # how auto chose
        calls.append({"wall": wall, "cpu": cpu, "encode": encode, "search": result.seconds, "checks": result.checks,
                      "peak_rss_mb": common.peak_rss_mb(), "evaluator": chosen, "proven": result.proven,
                      "optimum": optimum_of(result, case.metric), "full": full})
        kind = "full" if full and encoded is not None else "warm-up" if call < warmups else "timed"
        common.progress(f"{case.name}: {kind} call {wall:.2f} s (before the search {encode:.2f} s, search "
                        f"{result.seconds:.2f} s); {chosen}; {result.summary()}")
    return {"case": case.name, "rows": rows, "load_s": load_s, "calls": calls, "facts": common.machine_facts(con),
            "load_average_end": common.machine_facts()["load_average"]}


def duckanon_models(case: Case, population: str | None = None) -> list:
    """The case's privacy models as duckanon's (ArxModels.java's names, over ``case.sensitive``; ``population``, the
    table δ-presence and k-map compare with)."""
    if not case.models:
        return [KAnonymity(K)]
    models = []
    for spec in case.models:
        name, *values = spec.split(":")
        numbers = [float(v) for v in values if v.replace(".", "", 1).isdigit()]  # names (grassberger, dankar) aside
        models.append({
            "k": lambda: KAnonymity(int(numbers[0])),
            "basic-beta": lambda: BasicBetaLikeness(case.sensitive, numbers[0]),
            "enhanced-beta": lambda: EnhancedBetaLikeness(case.sensitive, numbers[0]),
            "delta-disclosure": lambda: DeltaDisclosurePrivacy(case.sensitive, numbers[0]),
            "entropy-l": lambda: EntropyLDiversity(case.sensitive, numbers[0],
                                                   "grassberger" if "grassberger" in values else "shannon"),
            "t-equal": lambda: TCloseness(case.sensitive, numbers[0]),
            "delta-presence": lambda: DeltaPresence(numbers[0], numbers[1], population),
            "k-map": lambda: KMap(int(numbers[0]), population=population),
            "average-risk": lambda: AverageReidentificationRisk(numbers[0]),
            "sample-uniqueness": lambda: SampleUniqueness(numbers[0]),
            "profitability": lambda: ProsecutorProfitability(**cost_benefit(numbers)),
            "profitability-journalist": lambda: JournalistProfitability(**cost_benefit(numbers), population=population),
            "population-uniqueness": lambda: PopulationUniqueness(numbers[0], common.USA_POPULATION, values[1],
                                                                  solver_steps=int(values[2])),
        }[name]())
    return models


def cost_benefit(numbers: list[float]) -> dict[str, float]:
    """ArxModels.java's COST:GAIN:LOSS:BENEFIT, as duckanon's CLI orders them, by name."""
    return dict(zip(("adversary_cost", "adversary_gain", "publisher_loss", "publisher_benefit"), numbers))


def optimum_of(result, metric: str) -> dict | None:
    if not result.found:
        return None
    return {"levels": {a: int(v) for a, v in result.levels.items()}, "value": float(result.best.values[metric]),
            "suppressed": int(result.best.suppressed)}


# ------------------------------------------------------------------- runners
def output_files(settings: Settings, label: str):
    """Files for a process's stdout and stderr, read back once it ends."""
    stem = settings.scratch / label
    return open(f"{stem}.out", "w+"), open(f"{stem}.err", "w+")


def failure(measured: common.Measured, err, settings: Settings) -> str | None:
    """Why a run gave no figures, with the end of what it wrote on ``err`` (a file, or None where it went to the
    terminal); None when it finished well."""
    if measured.returncode == 0:
        return None
    tail = ""
    if err is not None:
        err.seek(0)
        tail = " | ".join(err.read().strip().splitlines()[-5:])
    why = f"stopped after {settings.timeout:g} s" if measured.returncode is None else f"exit code {measured.returncode}"
    return f"{why}: {tail}" if tail else why


def data_file(case: Case, settings: Settings) -> str:
    """The file of all of the case's data (the population, where the case anonymizes a sample of it)."""
    return str(ihis_dir(settings.data_dir) / "ihis_synth.csv" if case.data == "ihis" else adult_csv(settings.data_dir))


def arx_input(case: Case, settings: Settings) -> tuple[list[str], list[str], int, float, str]:
    """(the driver's data arguments: file, delimiter, hierarchy pattern), quasi-identifiers, k, suppression, metric."""
    file = str(sample_path(settings.data_dir, case) / "sample.csv") if case.sample_alone else data_file(case, settings)
    if case.data == "ihis":
        data = [file, ";", str(IHIS_DIR / "hierarchies" / "ihis_hierarchy_%s.csv")]
        return data, IHIS_QIS, K, case.suppression, case.metric
    data = [file, ",", str(datasets.adult_hierarchy_dir() / "%s.csv")]
    if case.kind == "cold":
        job = main_job()
        return data, job.quasi_identifiers, job.k, job.suppression, job.metric
    return data, ADULT_QIS, K, case.suppression, case.metric


RUN_LINE = re.compile(r"^RUN (\d+) anonymize_ms=(\d+) epoch_ms_after=(\d+) optimum=\{(.*?)\} il=(\S+) il_low=\S+ "
                      r"suppressed=(-?\d+) checked=(-?\d+)", re.M)
LOAD_LINE = re.compile(r"^LOAD rows=(\d+) .*load_ms=(\d+)", re.M)


def arx_run(case: Case, settings: Settings, warmups: int, timed: int, label: str) -> dict:
    """One ARX JVM: the data loaded once, ``warmups`` then ``timed`` calls of ``anonymize()``.  ``seconds`` is the
    median of the timed calls, or for the cold case the time from process start to the first call's result."""
    data, qis, k, suppression, metric = arx_input(case, settings)
    repeats = warmups + timed
    if case.models:
        subset = [] if case.sample is None or case.sample_alone else [
            f"subset={sample_path(settings.data_dir, case) / 'sample.csv'}"]
        command = [*models_driver(settings), *data, ",".join(q for q in qis if q != case.sensitive),
                   case.sensitive or "-", repr(suppression), ARX_METRICS[metric], str(repeats), *subset, *case.models]
    else:
        command = [str(settings.arx / "arx-bench"), *data, str(k), repr(suppression), ARX_METRICS[metric],
                   str(repeats), ",".join(qis)]
    out, err = output_files(settings, label)
    with out, err:
        measured = common.run_measured(command, timeout=settings.timeout, stdout=out, stderr=err)
        error = failure(measured, err, settings)
        out.seek(0)
        text = out.read()
    runs = [{"ms": int(ms), "epoch_ms_after": int(after), "checks": int(checked),
             "optimum": arx_optimum(levels, value, suppressed)}
            for _, ms, after, levels, value, suppressed, checked in RUN_LINE.findall(text)]
    load = LOAD_LINE.search(text)
    if error is None and (len(runs) != repeats or load is None):
        error = f"unexpected output: {text.strip()[-300:]}"
    if error:
        return {"error": error, "peak_rss_mb": measured.peak_rss_mb, "process_wall": measured.wall}
    last = runs[-1]
    seconds = (runs[0]["epoch_ms_after"] / 1000 - measured.started if case.kind == "cold" else
               statistics.median(r["ms"] / 1000 for r in runs[warmups:]))
    return {"error": None, "seconds": seconds, "rows": int(load.group(1)), "load_s": int(load.group(2)) / 1000,
            "calls_s": [r["ms"] / 1000 for r in runs], "checks": last["checks"], "optimum": last["optimum"],
            "peak_rss_mb": measured.peak_rss_mb, "process_wall": measured.wall}


def models_driver(settings: Settings) -> list[str]:
    """The command that runs ArxModels.java, compiled against ARX's jars into the data folder when it changed."""
    return ["java", "-Xmx8g", "-cp", common.arx_classpath(settings.arx, settings.data_dir, MODELS_DRIVER),
            "ArxModels"]


def arx_optimum(levels: str, value: str, suppressed: str) -> dict | None:
    """The driver's ``optimum={sex=0, age=1, …} il=… suppressed=…`` as :func:`optimum_of` gives duckanon's; None
    when ARX found none (``{}``)."""
    if not levels.strip():
        return None
    pairs = (part.split("=") for part in levels.split(","))
    return {"levels": {a.strip(): int(v) for a, v in pairs}, "value": float(value), "suppressed": int(suppressed)}


def duckanon_warm(case: Case, settings: Settings, label: str) -> dict:
    """A duckanon child process; ``seconds`` and the other figures are medians of its timed calls."""
    result_path = settings.scratch / f"{label}.json"
    warmups, timed = settings.calls_of(case)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", case.name, "--child-output",
               str(result_path), "--evaluator", settings.evaluator, "--warmups", str(warmups), "--calls", str(timed),
               "--data-dir", str(settings.data_dir)]
    # The child's progress (stderr) goes to the terminal as it comes.
    with open(settings.scratch / f"{label}.out", "w") as out:
        measured = common.run_measured(command, timeout=settings.timeout, env=common.checkout_environment(),
                                       stdout=out)
    error = failure(measured, None, settings)
    if error:
        return {"error": error, "peak_rss_mb": measured.peak_rss_mb, "process_wall": measured.wall}
    child_result = json.loads(result_path.read_text())
    full = [c["wall"] for c in child_result["calls"] if c["full"]]
    calls = [c for c in child_result["calls"][warmups:] if not c["full"]] or child_result["calls"][warmups:]
    last = calls[-1]
    return {"error": None, **{key: median(c[key] for c in calls) for key in ("encode", "search", "cpu")},
            "seconds": median(c["wall"] for c in calls), "full_call_s": full[-1] if full else float("nan"),
            "rows": child_result["rows"],
            "load_s": child_result["load_s"], "calls_s": [c["wall"] for c in child_result["calls"]],
            "checks": last["checks"], "evaluator": evaluator_kind(last["evaluator"]), "optimum": last["optimum"],
            "call_peak_rss_mb": max(c["peak_rss_mb"] for c in calls), "peak_rss_mb": measured.peak_rss_mb,
            "process_wall": measured.wall, "facts": child_result["facts"],
            "load_average_end": child_result["load_average_end"]}


def evaluator_kind(announced: str) -> str:
    """``memory`` or ``sql`` as the search announced it (``evaluating nodes in process: …``)."""
    return "memory" if "in process" in announced else "sql" if "in SQL" in announced else "?"


SUMMARY_LINE = re.compile(r"(\{.*?\}) with \S+ = (\S+), (\d+) records suppressed \((\d+) of \d+ nodes checked, "
                          r"([\d.]+) s\)")


def install_as_readme(venv: Path) -> None:
    """The checkout installed as the README's main command installs it: a fresh virtual environment and ``pip install
    .`` (its bytecode compiled, only the core dependencies), not the checkout this script runs from."""
    common.progress(f"installing the checkout into {venv}, as the README does")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(Path(__file__).resolve().parent.parent)],
                   check=True, stdout=subprocess.DEVNULL)


def duckanon_cold(settings: Settings, label: str) -> dict:
    """The README's main command in a fresh process of the README's installation, in a folder of its own;
    ``seconds`` is its whole life, which ends once the release is written and verified."""
    folder = settings.scratch / f"{label}-release"
    folder.mkdir()
    command = [str(settings.installed / "bin" / "duckanon"), *MAIN_COMMAND]
    if settings.evaluator != "auto":
        command += ["--evaluator", settings.evaluator]
    out, err = output_files(settings, label)
    with out, err:
        measured = common.run_measured(command, timeout=settings.timeout, cwd=folder, stdout=out, stderr=err)
        error = failure(measured, err, settings)
        out.seek(0)
        text = out.read()
    release = folder / MAIN_COMMAND[-1]
    summary = SUMMARY_LINE.search(text)
    if error is None and (summary is None or not release.is_file()):
        error = f"no release or no search summary: {text.strip()[-300:]}"
    shutil.rmtree(folder, ignore_errors=True)
    if error:
        return {"error": error, "peak_rss_mb": measured.peak_rss_mb, "process_wall": measured.wall}
    levels, value, suppressed, checks, search = summary.groups()
    return {"error": None, "seconds": measured.wall, "search": float(search), "checks": int(checks),
            "optimum": {"levels": ast.literal_eval(levels), "value": float(value), "suppressed": int(suppressed)},
            "peak_rss_mb": measured.peak_rss_mb, "process_wall": measured.wall}


def run_pair(case: Case, pair: int, settings: Settings) -> dict:
    """Both tools back to back (ARX first in odd pairs), with the load average while they run."""
    order = ("arx", "duckanon") if pair % 2 else ("duckanon", "arx")
    if not case.with_arx:
        order = ("duckanon",)
    runners = {
        "arx": lambda: arx_run(case, settings, *((0, 1) if case.kind == "cold" else settings.calls_of(case)),
                               label=f"{case.name}-{pair}-arx"),
        "duckanon": lambda: (duckanon_cold(settings, f"{case.name}-{pair}-duckanon") if case.kind == "cold"
                             else duckanon_warm(case, settings, f"{case.name}-{pair}-duckanon")),
    }
    runs = {}
    with LoadSampler() as load:
        for tool in order:
            common.progress(f"pair {pair}, {case.name}: {tool}")
            runs[tool] = runners[tool]()
            run = runs[tool]
            said = (f"failed ({run['error']})" if run["error"] else
                    f"{run['seconds']:.3f} s, peak {run['peak_rss_mb']:.0f} MB, {run['checks']} checks")
            common.progress(f"  {tool}: {said}")
    return {"pair": pair, "first": order[0], "load": statistics.mean(load.samples), **runs}


# -------------------------------------------------------------------- report
def median(values) -> float:
    values = [v for v in values if v is not None and v == v]
    return statistics.median(values) if values else float("nan")


def same_optimum(case: Case, arx: dict, duck: dict) -> tuple[bool, str]:
    """Whether both found the same node (with the same value where the metric is defined alike), and how they
    differ otherwise."""
    a, d = arx["optimum"], duck["optimum"]
    if a is None or d is None:
        return False, "one found none"
    if a["levels"] != d["levels"]:
        return False, "levels differ"
    if a["suppressed"] != d["suppressed"]:
        return False, "suppressed records differ"
    if case.metric in ALIKE and not math.isclose(a["value"], d["value"], rel_tol=1e-9):
        if any(m.split(":")[0] in RISK_THRESHOLDS for m in case.models):
            # The cut takes as many classes of its last size as ARX's, not the same ones: ARX orders them by their
            # information loss (or first record), duckanon by their values.
            return True, f"same node and records; {case.metric} differs by which classes of the cut's last size go"
        return False, f"{case.metric} values differ"
    return True, "yes" if case.metric in ALIKE else "levels and suppressed (Loss defined apart)"


def same_optimum_text(case: Case, same: bool, text: str) -> str:
    if same:
        return text
    return f"NO: {text}" + (" (Loss defined apart)" if case.metric == "loss" else "")


def pair_ratio(pair: dict) -> float:
    arx, duck = pair.get("arx"), pair.get("duckanon")
    if not arx or not duck or arx["error"] or duck["error"]:
        return float("nan")
    return duck["seconds"] / arx["seconds"]


def case_summary(case: Case, pairs: list[dict]) -> dict:
    ducks = [p["duckanon"] for p in pairs if not p["duckanon"]["error"]]
    arxs = [p["arx"] for p in pairs if case.with_arx and not p["arx"]["error"]]
    compared = [p for p in pairs if case.with_arx and not p["arx"]["error"] and not p["duckanon"]["error"]]
    optima = [same_optimum(case, p["arx"], p["duckanon"]) for p in compared]
    differing = [text for same, text in optima if not same]
    summary = {
        "arx_s": median(r["seconds"] for r in arxs), "duckanon_s": median(r["seconds"] for r in ducks),
        "ratios": [pair_ratio(p) for p in pairs], "loads": [p["load"] for p in pairs],
        "arx_peak": max((r["peak_rss_mb"] for r in arxs), default=float("nan")),
        "duckanon_peak": max((r["peak_rss_mb"] for r in ducks), default=float("nan")),
        "arx_checks": sorted({r["checks"] for r in arxs}), "duckanon_checks": sorted({r["checks"] for r in ducks}),
        "same": all(same for same, _ in optima) if optima else None,
        "same_text": "; ".join(sorted(set(differing or [text for _, text in optima]))) if optima else "–",
        "failed": len(pairs) - len(compared) if case.with_arx else len(pairs) - len(ducks),
    }
    summary["ratio"] = median(summary["ratios"])
    summary["met"] = met(case, summary, bool(ducks))
    return summary


def met(case: Case, s: dict, ran: bool) -> str:
    if not ran or (case.with_arx and s["ratio"] != s["ratio"]):
        return "no run"
    if case.target() == "–":
        return "–"
    misses = []
    if case.ratio_target is not None and not s["ratio"] <= case.ratio_target:
        misses.append(f"ratio {s['ratio']:.2f}")
    if case.memory_target_mb is not None and not s["duckanon_peak"] < case.memory_target_mb:
        misses.append(f"{s['duckanon_peak']:.0f} MB")
    if case.seconds_target is not None and not s["duckanon_s"] < case.seconds_target:
        misses.append(f"{s['duckanon_s']:.0f} s")
    if case.same_optimum_required and not s["same"]:
        misses.append("optimum differs")
    return "met" if not misses else "not met (" + ", ".join(misses) + ")"


def listed(values, form: str) -> str:
    return " / ".join("–" if v != v else format(v, form) for v in values) or "–"


def rows_of(pairs: list[dict]) -> str:
    counts = sorted({r["rows"] for p in pairs for r in (p.get("arx"), p["duckanon"]) if r and not r["error"]
                     and "rows" in r})
    return " / ".join(f"{n:,}" for n in counts) or "–"


SUMMARY_HEADERS = ["case", "rows", "ARX s", "duckanon s", "duckanon/ARX per pair", "median ratio", "load per pair",
                   "peak MB ARX / duckanon", "checks ARX / duckanon", "same optimum", "ARX figure (issue)", "target",
                   "met"]


def summary_row(case: Case, pairs: list[dict], s: dict) -> list:
    rows = rows_of(pairs)
    if not case.with_arx:
        return [case.name, rows, "–", s["duckanon_s"], "–", "–", listed(s["loads"], ".2f"),
                f"– / {s['duckanon_peak']:.0f}", f"– / {listed(s['duckanon_checks'], 'd')}", "–", case.arx_figure,
                case.target(), s["met"]]
    return [case.name, rows, s["arx_s"], s["duckanon_s"], listed(s["ratios"], ".2f"), s["ratio"],
            listed(s["loads"], ".2f"), f"{s['arx_peak']:.0f} / {s['duckanon_peak']:.0f}",
            f"{listed(s['arx_checks'], 'd')} / {listed(s['duckanon_checks'], 'd')}",
            "–" if s["same"] is None else same_optimum_text(case, s["same"], s["same_text"]),
            case.arx_figure, case.target(), s["met"]]


def figure(run: dict | None, key: str, form: str = ".3f") -> str:
    if not run:
        return "–"
    if run["error"]:
        return "failed"
    value = run.get(key)
    return "–" if value is None or value != value else format(value, form)


def detail_table(case: Case, pairs: list[dict]) -> str:
    if not case.with_arx:
        headers = ["pair", "load", "call s", "encode s", "search s", "CPU s", "peak MB", "checks", "evaluator"]
        rows = [[p["pair"], f"{p['load']:.2f}", figure(p["duckanon"], "seconds"), figure(p["duckanon"], "encode"),
                 figure(p["duckanon"], "search"), figure(p["duckanon"], "cpu", ".2f"),
                 figure(p["duckanon"], "peak_rss_mb", ".0f"), figure(p["duckanon"], "checks", "d"),
                 p["duckanon"].get("evaluator", "–")] for p in pairs]
        return common.markdown_table(headers, rows)
    headers = ["pair", "first", "load", "ARX s", "duckanon s", "encode s", "search s", "full s", "ratio", "ARX peak MB",
               "duckanon peak MB", "ARX checks", "duckanon checks", "same optimum", "duckanon evaluator"]
    rows = []
    for p in pairs:
        arx, duck = p["arx"], p["duckanon"]
        same = "–" if arx["error"] or duck["error"] else same_optimum_text(case, *same_optimum(case, arx, duck))
        rows.append([p["pair"], p["first"], f"{p['load']:.2f}", figure(arx, "seconds"), figure(duck, "seconds"),
                     figure(duck, "encode"), figure(duck, "search"), figure(duck, "full_call_s"),
                     listed([pair_ratio(p)], ".2f"),
                     figure(arx, "peak_rss_mb", ".0f"), figure(duck, "peak_rss_mb", ".0f"), figure(arx, "checks", "d"),
                     figure(duck, "checks", "d"), same, duck.get("evaluator", "–") or "–"])
    return common.markdown_table(headers, rows)


def optima_text(case: Case, pairs: list[dict]) -> str:
    lines = []
    for tool in ("arx", "duckanon"):
        seen = {json.dumps(p[tool]["optimum"], sort_keys=False) for p in pairs
                if p.get(tool) and not p[tool]["error"]}
        for optimum in sorted(seen):
            o = json.loads(optimum)
            if o is None:
                lines.append(f"- {tool}: no transformation found")
                continue
            levels = ", ".join(f"{a}={v}" for a, v in o["levels"].items())
            lines.append(f"- {tool}: {levels}; {case.metric} = {o['value']:.10g}; {o['suppressed']:,} suppressed")
    errors = [f"- pair {p['pair']} {tool} failed: {p[tool]['error']}" for p in pairs for tool in ("arx", "duckanon")
              if p.get(tool) and p[tool]["error"]]
    return "\n".join(lines + errors)


CASE_TEXT = {
    "warm": "ARX s: the warm `anonymize()` call on the data it loaded; duckanon s: the warm `anon.search` call on the "
            "source encoded once (`anon.encode`, as ARX keeps the data it loaded and encoded; encode s: building the "
            "node evaluator; search s: the search itself); full s: one `anon.search` on the table, reading and "
            "encoding it again.",
    "cold": "ARX s: process start to the first result (JVM start, loading the CSV and hierarchies, one "
            "`anonymize()`); duckanon s: `duckanon " + " ".join(MAIN_COMMAND) + "` from process start to "
            "exit (search, release written and verified); search s: the search as the command reports it.",
    "scale": "call s: one `anon.search` on the Parquet file (no warm-up: a user's call); encode s: reading the file "
             "into the frequency table and building the node evaluator; search s: the search itself.",
}


def report_text(cases: list[Case], records: dict[str, list[dict]], summaries: dict[str, dict],
                settings: Settings, skipped: list[str]) -> tuple[str, str]:
    table = common.markdown_table(SUMMARY_HEADERS, [summary_row(c, records[c.name], summaries[c.name])
                                                    for c in cases])
    sections = [table]
    for case in cases:
        what = (f"{case.metric}, {case.suppression:.0%} suppression" if case.kind != "cold" else
                "the README's main command against ARX's first result")
        sections.append(f"### {case.name}: {what}\n\n{CASE_TEXT[case.kind]}\n\n{detail_table(case, records[case.name])}"
                        f"\n\n{optima_text(case, records[case.name])}")
    compared = any(c.with_arx for c in cases)
    models = "; ".join(f"{c.name}: {', '.join(c.models)}"
                       + (f" over {c.sensitive}" if c.sensitive else
                          f" on the {c.sample} sample, all of {c.data} its population" if c.sample else "")
                       for c in cases if c.models)
    policies = (f"k-anonymity, k = {K}" if not models else
                f"{models} (both tools with ARX's suppression semantics, duckanon's `replace-unchecked`)"
                + (f"; the others k-anonymity, k = {K}" if any(not c.models for c in cases) else ""))
    notes = [f"- {policies}; load: the 1-minute load average sampled every 2 s while a pair ran (mean), "
             f"on {os.cpu_count()} cores; every case's pairs alternate which tool goes first."]
    warm = [c for c in cases if c.kind == "warm"]
    if warm:
        timed = ", ".join(f"{c.name} {settings.calls_of(c)[1]}" for c in warm)
        notes.append(f"- warm cases: each process made {settings.warmups} untimed call(s) first (ARX's first "
                     f"compiles its code), then timed ones whose median is its figure ({timed}).")
    notes.append("- peak MB: each process's peak RSS as the kernel reports it when it ends, the largest over the "
                 "pairs: the duckanon process with its loaded table"
                 + ("; the JVM (-Xmx8g), whose driver also builds each result's output to count suppressed records."
                    if compared else "."))
    if compared:
        notes.append("- same optimum: the same levels and suppressed records, and for the metrics both define alike "
                     "(DM: Σ|E|² over kept classes + n per suppressed record; ARX's DM*, Loss and entropies, which "
                     "duckanon implements as `dm-star`, `arx-loss`, `arx-entropy`, `arx-nm-entropy`) the same value.")
    if any(c.metric == "loss" and c.with_arx for c in cases):
        notes.append("- Loss: ARX's is a geometric mean over the attributes (gs = 0.5), duckanon's `loss` a sum of "
                     "each attribute's average loss with a suppressed record losing 1; the values differ by "
                     "definition, so Loss optima are compared by node only.")
    if any(c.kind == "cold" for c in cases):
        job = main_job()
        notes.append(f"- cold: the CLI's bundled job ({len(job.quasi_identifiers)} quasi-identifiers "
                     f"{', '.join(job.quasi_identifiers)}; k = {job.k}; {job.suppression:.0%}; {job.metric}), and ARX "
                     "on the same quasi-identifiers of the same records with its own Loss; duckanon installed into "
                     "a fresh virtual environment by `pip install .`, as the README does; one untimed run of each "
                     "before the pairs.")
    if any(c.kind == "scale" for c in cases):
        notes.append("- scale: Adult's 30,162 complete records drawn with replacement and no noise "
                     "(`datasets.resample_adult(con, n, table, noise=False)`, seed 0), written as Parquet into "
                     f"`{settings.data_dir}`; the search reads that file.")
    notes.append(f"- duckanon evaluator asked: `{settings.evaluator}` (`anon.search(..., evaluator=...)`; the cold "
                 "case passes `--evaluator` unless it is auto); the tables give the one used.")
    if compared:
        notes.append(f"- ARX: 3.9.2 (`{settings.arx}`), {java_version()}.")
    notes += [f"- skipped: {text}" for text in skipped]
    return "\n\n".join(sections), "\n".join(notes)


def java_version() -> str:
    try:
        shown = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr
        return shown.strip().splitlines()[0] if shown.strip() else "java version unknown"
    except (OSError, subprocess.SubprocessError):
        return "java not found"


def arx_available(path: Path) -> str | None:
    """Why ARX cannot run from ``path``, or None when it can."""
    if not (path / "arx-bench").is_file():
        return f"no ARX driver at {path} (give its folder with --arx)"
    if shutil.which("java") is None or shutil.which("javac") is None:
        return "java or javac (17+) is not on PATH"
    return None


# ---------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    names = [c.name for c in [*WARM_CASES, *MODEL_CASES]] + list(GROUPS)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=names, default=[g for g in GROUPS if g != "models"],
                        help="cases or groups of them (adult, ihis, scale, cold, models; default all but models)")
    parser.add_argument("--pairs", type=int, default=3,
                        help="rounds of both tools per case (default 3; 0 prepares the data only)")
    parser.add_argument("--evaluator", choices=EVALUATORS, default="auto", help="duckanon's node evaluator")
    parser.add_argument("--warmups", type=int, default=1, help="untimed calls per process first (default 1)")
    parser.add_argument("--calls", type=int, default=None,
                        help="timed calls per process, whose median is the figure (default 5 on Adult, 1 on IHIS)")
    parser.add_argument("--scale-rows", nargs="+", type=int, default=DEFAULT_SCALE_ROWS,
                        help="record counts of the scale cases (default 10M and 100M)")
    parser.add_argument("--arx", type=Path, default=DEFAULT_ARX, help="the ARX driver's folder (arx-bench)")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="where prepared data is kept between runs")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before one process is stopped")
    parser.add_argument("--output", type=Path, default=RESULTS, help="markdown results file")
    parser.add_argument("--json", type=Path, default=None, help="also write every run as JSON")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-output", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child is not None:
        result = child(case_named(args.child), args.evaluator, args.warmups, args.calls, args.data_dir)
        args.child_output.write_text(json.dumps(result))
        return 0

    load = common.load_at_start()
    cases = chosen_cases(args.cases, args.scale_rows)
    skipped = []
    missing = arx_available(args.arx)
    if missing is not None:
        without = [c.name for c in cases if c.with_arx]
        if without:
            skipped.append(f"{', '.join(without)}: {missing}")
            common.progress(f"skipping {', '.join(without)}: {missing}")
        cases = [c for c in cases if not c.with_arx]
    records: dict[str, list[dict]] = {c.name: [] for c in cases}
    with tempfile.TemporaryDirectory(prefix="duckanon-arx-") as scratch:
        settings = Settings(None if missing else args.arx.resolve(), args.data_dir.resolve(), args.evaluator,
                            args.warmups, args.calls, args.timeout, Path(scratch))
        prepare(cases, settings)
        if args.pairs == 0:
            common.progress("data prepared; --pairs 0 runs nothing")
            return 0
        first_runs(cases, settings)
        for pair in range(1, args.pairs + 1):
            for case in cases:
                records[case.name].append(run_pair(case, pair, settings))
    summaries = {c.name: case_summary(c, records[c.name]) for c in cases}
    table, notes = report_text(cases, records, summaries, settings, skipped)
    facts = [r for c in cases for p in records[c.name] for r in [p["duckanon"]] if "facts" in r]
    results = [{"case": c.name, "pairs": records[c.name], "summary": summaries[c.name]} for c in cases]
    if facts:  # what common.report writes as the machine's facts and the load at the end
        results[0]["facts"] = facts[0]["facts"]
        results[0]["load_average_end"] = facts[-1]["load_average_end"]
    command = "python benchmarks/bench_arx.py " + " ".join(argv if argv is not None else sys.argv[1:])
    common.report("duckanon beside ARX 3.9.2", command, table, notes, results, load, args.output, args.json)
    return 1 if any(s["failed"] for s in summaries.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
