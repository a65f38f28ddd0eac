"""duckanon's heuristic searches beside ARX 3.9.2's, in the same time, on 20-40 quasi-identifiers.

    python benchmarks/bench_heuristics.py [--attributes 20 30 40] [--rows 20000] [--time-limit 20] [--pairs 1]
        [--algorithms lightning top-down genetic] [--arx ../shared/peers/arx] [--data-dir DIR] [--output FILE]

The data is duckanon's wide synthetic table (:mod:`duckanon.datasets.wide`: correlated attributes, every third
numeric with intervals of 5, 25, 50; the others categorical; lattices of 10^12 to 10^24 nodes), written as CSV with
ARX-format hierarchies into ``--data-dir``, so that both tools read the same files.  Policy: k-anonymity, k = 5, 5 %
suppression, ARX's Loss (duckanon ``arx-loss``; ARX's suppressed records unchecked, duckanon
``suppression="replace-unchecked"``), which both minimize.

For each width and algorithm, pairs run interleaved (ARX, then duckanon): ARX's driver loads the data once and runs
its algorithm twice with the time limit (the first warms its JIT; the second is reported); duckanon, in a process of
its own, encodes the table once, searches once untimed with a tenth of the limit, then with the limit.  ``Loss`` is
the best node's value by ARX's definition, ARX's node re-evaluated by duckanon's evaluator too (the same definition,
so the two columns compare); ``checks`` the nodes evaluated.  The genetic searches draw at random (ARX's driver
without a seed, duckanon's from fresh entropy): compare them over pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import bench_arx  # noqa: E402
import common  # noqa: E402
import duckdb  # noqa: E402

import duckanon  # noqa: E402
from duckanon import KAnonymity, Policy  # noqa: E402
from duckanon.datasets.wide import generate_wide  # noqa: E402
from duckanon.search.run import evaluator as node_evaluator  # noqa: E402
from duckanon.encode.binding import bind  # noqa: E402

RESULTS = HERE / "results" / "heuristics.md"
K, SUPPRESSION, METRIC, SEED = 5, 0.05, "arx-loss", 1
RUN_LINE = re.compile(r"RUN (\d+) anonymize_ms=(\d+) epoch_ms_after=\d+ optimum=\{([^}]*)\} il=(\S+) il_low=\S+ "
                      r"suppressed=(-?\d+) checked=(\d+)")


def data_files(folder: Path, rows: int, attributes: int) -> tuple[Path, list[str]]:
    """The wide table's CSV and hierarchies in ``folder`` (made once per size), and its attributes."""
    target = folder / f"wide-{rows}-{attributes}"
    csv = target / "wide.csv"
    if not csv.is_file():
        target.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect()
        hierarchies = generate_wide(con, "wide", rows, attributes, seed=SEED)
        for name, hierarchy in hierarchies.items():
            hierarchy.to_arx_csv(target / f"hierarchy_{name}.csv")
        partial = target / "wide.partial.csv"
        con.table("wide").write_csv(str(partial), sep=";", header=True)
        os.replace(partial, csv)
    return csv, [f"q{i + 1:02d}" for i in range(attributes)]


def policy_of(con, rows: int, attributes: int) -> Policy:
    hierarchies = generate_wide(con, "wide", rows, attributes, seed=SEED)
    return Policy(quasi_identifiers=hierarchies, models=[KAnonymity(K)], suppression_limit=SUPPRESSION,
                  suppression="replace-unchecked")


def child(args) -> None:
    """duckanon in a process of its own: encode once, an untimed short search, then the timed one."""
    con = duckdb.connect()
    policy = policy_of(con, args.rows, args.child_attributes)
    anon = duckanon.connect(con)
    encoded = anon.encode("wide", policy)
    anon.search(encoded, None, metric=METRIC, strategy=args.child_algorithm, time_limit=args.time_limit / 10)
    common.reset_peak_rss()
    started = time.perf_counter()
    result = anon.search(encoded, None, metric=METRIC, strategy=args.child_algorithm, time_limit=args.time_limit)
    seconds = time.perf_counter() - started
    out = {"seconds": seconds, "checks": result.checks, "found": result.found, "proven": result.proven,
           "loss": float(result.best.values[METRIC]) if result.found else None,
           "levels": result.levels if result.found else None, "suppressed": result.best.suppressed if result.found
           else None, "peak_rss_mb":
           common.peak_rss_mb(), "lattice": result.lattice_size}
    Path(args.child_output).write_text(json.dumps(out))


def arx(settings, csv: Path, qis: list[str], algorithm: str) -> dict:
    driver = models_driver(settings)
    command = [*driver, str(csv), ";", str(csv.parent / "hierarchy_%s.csv"), ",".join(qis), "-", repr(SUPPRESSION),
               "loss", "2", f"algorithm={algorithm}:{int(settings.time_limit * 1000)}", f"k:{K}"]
    out_path = settings.scratch / "arx.out"
    with open(out_path, "w+") as out:
        measured = common.run_measured(command, timeout=settings.time_limit * 4 + 300, stdout=out)
        out.seek(0)
        text = out.read()
    runs = RUN_LINE.findall(text)
    if measured.returncode != 0 or len(runs) != 2:
        return {"error": f"exit {measured.returncode}: {text[-300:]}"}
    _, ms, levels, loss, suppressed, checked = runs[-1]
    found = bool(levels.strip())
    return {"error": None, "seconds": int(ms) / 1000, "checks": int(checked), "found": found,
            "loss": float(loss) if found else None, "suppressed": int(suppressed) if found else None,
            "levels": {a.strip(): int(v) for a, v in (p.split("=") for p in levels.split(","))} if found else None,
            "peak_rss_mb": measured.peak_rss_mb}


def models_driver(settings) -> list[str]:
    return bench_arx.models_driver(argparse.Namespace(arx=settings.arx, data_dir=settings.data_dir))


def duckanon_value(rows: int, attributes: int, levels: dict[str, int]) -> float:
    """ARX's node's ARX Loss by duckanon's evaluator."""
    con = duckdb.connect()
    policy = policy_of(con, rows, attributes)
    anon = duckanon.connect(con)
    with bind(anon.workspace, "wide", policy) as bound, node_evaluator(anon.workspace, bound, [METRIC], None) as ev:
        return float(ev.evaluate(ev.lattice.index(ev.lattice.node_of(levels))).values[METRIC])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attributes", type=int, nargs="+", default=[20, 30, 40])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--algorithms", nargs="+", default=["lightning", "top-down", "genetic"])
    parser.add_argument("--arx", type=Path, default=HERE.parent.parent / "shared" / "peers" / "arx")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "duckanon-wide")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--child-output")
    parser.add_argument("--child-attributes", type=int)
    parser.add_argument("--child-algorithm")
    args = parser.parse_args()
    if args.child_output:
        child(args)
        return
    args.data_dir.mkdir(parents=True, exist_ok=True)
    args.scratch = args.data_dir
    load = common.load_at_start()
    with_arx = (args.arx / "arx-3.9.2-core.jar").is_file()
    if not with_arx:
        common.progress(f"ARX not found in {args.arx}: duckanon alone")
    rows, results = [], []
    for attributes in args.attributes:
        csv, qis = data_files(args.data_dir, args.rows, attributes)
        for algorithm in args.algorithms:
            for pair in range(1, args.pairs + 1):
                common.progress(f"{attributes} attributes, {algorithm}, pair {pair}: ARX")
                theirs = arx(args, csv, qis, algorithm) if with_arx else {"error": "not run"}
                common.progress(f"{attributes} attributes, {algorithm}, pair {pair}: duckanon")
                ours = common.run_child(__file__, ["--child-attributes", str(attributes), "--child-algorithm",
                                                   algorithm, "--rows", str(args.rows), "--time-limit",
                                                   str(args.time_limit)], timeout=args.time_limit * 4 + 300)
                their_value = (duckanon_value(args.rows, attributes, theirs["levels"])
                               if theirs.get("found") else None)
                results.append({"attributes": attributes, "algorithm": algorithm, "pair": pair, "arx": theirs,
                                "duckanon": ours, "arx_value_by_duckanon": their_value,
                                "load_average": os.getloadavg()[0]})
                rows.append(row_of(attributes, algorithm, pair, theirs, ours, their_value))
                common.progress(" | ".join(str(c) for c in rows[-1]))
    table = common.markdown_table(
        ["QIs", "lattice", "algorithm", "pair", "ARX Loss", "ARX's node by duckanon", "ARX checks", "ARX s",
         "duckanon Loss", "duckanon checks", "duckanon s", "lower Loss", "load"], rows)
    note = (f"Both with a {args.time_limit:g} s limit; {args.rows:,} records; k = {K}, {SUPPRESSION:.0%} suppression, "
            "ARX's Loss (geometric mean of the attributes' normalized losses). `none`: no satisfying node found "
            "within the limit. The lattice sizes are exact; neither tool lists it.")
    facts = common.facts_markdown({**common.machine_facts(), "load_average_start": f"{load:.2f}"})
    common.write_text(args.output, f"# Heuristic searches beside ARX 3.9.2\n\n`python benchmarks/bench_heuristics.py "
                                   f"{' '.join(sys.argv[1:])}`\n\n{table}\n\n{note}\n\n## Machine\n\n{facts}\n")
    (args.output.with_suffix(".json")).write_text(json.dumps(results, indent=1))
    print(table)
    print(note)


def row_of(attributes, algorithm, pair, theirs, ours, their_value) -> list:
    def loss(value):
        return "none" if value is None else f"{value:.6f}"

    arx_ok = not theirs.get("error")
    lower = "-"
    if arx_ok and ours["found"] and theirs["found"]:
        gap = ours["loss"] - their_value
        lower = "duckanon" if gap < -1e-12 else "ARX" if gap > 1e-12 else "equal"
    elif arx_ok and ours["found"] != theirs["found"]:
        lower = "duckanon" if ours["found"] else "ARX"
    return [attributes, f"{ours['lattice']:.2e}", algorithm, pair,
            loss(theirs.get("loss")) if arx_ok else theirs["error"][:40], loss(their_value),
            theirs.get("checks", "-"), f"{theirs['seconds']:.1f}" if arx_ok else "-", loss(ours["loss"]),
            ours["checks"], f"{ours['seconds']:.1f}", lower, f"{os.getloadavg()[0]:.2f}"]


if __name__ == "__main__":
    main()
