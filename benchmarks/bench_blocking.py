"""What MDAV and seed 001's clustering within blocks cost in utility against the exact methods, and what they save in
time (issue 30).

    python benchmarks/bench_blocking.py [--k 5 10 25] [--block-sizes 20000 10000 5000 2000] [--rows 1000000]
                                        [--semi-block-sizes 20000 10000 5000]

On Adult's 30,162 complete records and its six numeric attributes (age, fnlwgt, education-num, capital-gain,
capital-loss, hours-per-week, standardized as MDAV standardizes them), for each k: exact MDAV and MDAV within blocks
of each size (``duckanon.cluster.blocking.blocks``: halved between different values nearest the median of the attribute
of widest interquartile range until no block is larger).  Utility is the information loss microaggregation is judged by, SSE / SST: the squared distances of the
records to their group's mean over those to the overall mean (pandas, from the groups alone), and its ratio to exact
MDAV's.  Then ``--rows`` records of Adult resampled with noise, grouped by ``anon.cluster`` with the default block
size (reading the records and grouping them), beside exact MDAV's time extrapolated from Adult's as n² (exact MDAV
is quadratic).

Seed 001's semi-supervised clustering likewise: on Adult's 30,162 records under ``bench_clustering``'s policy (eight
quasi-identifiers, occupation's three most frequent values at α 0.3 and every value at 0.4, k = 25), exactly and
within blocks of each of ``--semi-block-sizes`` (cut from the records' points, ``RecordSpace.points``); utility is
seed 001's information loss, the NCP summed over records and attributes (``Clusters.information_loss``), per record.
Then ``--rows`` resampled records with the default block size.  Timings are not tests.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's duckanon, not an installed one
sys.path.insert(0, str(HERE))

import common  # noqa: E402
import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from bench_clustering import policy as clustering_policy  # noqa: E402

import duckanon  # noqa: E402
from duckanon import MDAV, KAnonymity, Policy, SemiSupervisedClustering, datasets  # noqa: E402
from duckanon.cluster import semisupervised  # noqa: E402
from duckanon.cluster.blocking import record_blocks  # noqa: E402
from duckanon.cluster.mdav import BLOCK_SIZE, blocked_mdav  # noqa: E402

NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]


def information_loss(points: np.ndarray, groups: np.ndarray) -> float:
    """SSE / SST of ``points`` grouped by ``groups``."""
    frame = pd.DataFrame(points)
    means = frame.groupby(groups).transform("mean")
    return float(((frame - means) ** 2).to_numpy().sum() / ((frame - frame.mean()) ** 2).to_numpy().sum())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, nargs="+", default=[5, 10, 25])
    parser.add_argument("--block-sizes", type=int, nargs="+", default=[20_000, 10_000, 5_000, 2_000])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--semi-block-sizes", type=int, nargs="+", default=[20_000, 10_000, 5_000])
    parser.add_argument("--output", type=Path, default=HERE / "results" / "blocking.md")
    args = parser.parse_args(argv)
    load = common.load_at_start()
    con = duckdb.connect()
    datasets.load_adult(con, "adult")
    frame = con.table("adult").df()[NUMERIC].astype(float)
    values = frame.to_numpy()
    points = (values - values.mean(axis=0)) / values.std(axis=0)
    rows, exact_seconds = [], {}
    for k in args.k:
        exact_loss = None
        for size in [None, *args.block_sizes]:
            common.progress(f"k = {k}, {'exact' if size is None else f'blocks of {size:,}'}")
            started = time.perf_counter()
            groups = blocked_mdav(points, k, size)[0]
            seconds = time.perf_counter() - started
            loss = information_loss(points, groups)
            if size is None:
                exact_loss, exact_seconds[k] = loss, seconds
            sizes = np.bincount(groups)
            rows.append([k, "exact" if size is None else f"{size:,}",
                         len(record_blocks(points, size, k)), f"{seconds:.2f}", f"{loss:.5f}",
                         f"{loss / exact_loss:.3f}", f"{sizes.min()}–{sizes.max()}"])
    table = common.markdown_table(["k", "block size", "blocks", "s", "SSE / SST", "against exact", "group sizes"],
                                  rows)
    common.progress(f"{args.rows:,} records: resampling Adult with noise")
    datasets.resample_adult(con, args.rows, "large", seed=0)
    anon = duckanon.connect(con, progress=common.progress)
    policy = Policy(quasi_identifiers={q: None for q in NUMERIC}, models=[KAnonymity(args.k[-1])], others="drop")
    started = time.perf_counter()
    clusters = anon.cluster("large", policy, MDAV())
    seconds = time.perf_counter() - started
    large_points = np.column_stack([clusters.records.columns[q] for q in NUMERIC])
    large_points = (large_points - large_points.mean(axis=0)) / large_points.std(axis=0)
    extrapolated = exact_seconds[args.k[-1]] * (args.rows / len(points)) ** 2
    large = common.markdown_table(
        ["records", "k", "block size", "anon.cluster s", "groups", "SSE / SST", "exact MDAV, extrapolated as n² s",
         "peak MB"],
        [[f"{args.rows:,}", args.k[-1], f"{BLOCK_SIZE:,}", f"{seconds:.1f}", f"{clusters.count:,}",
          f"{information_loss(large_points, clusters.groups):.5f}", f"{extrapolated:,.0f}",
          f"{common.peak_rss_mb():,.0f}"]])
    semi = semi_table(con, args.semi_block_sizes, args.rows)
    notes = ("- Adult's 30,162 complete records, six numeric attributes standardized; the same points for every run.\n"
             "- SSE / SST from the groups alone (pandas); `against exact`: the ratio to exact MDAV's at the same k.\n"
             f"- The large run: Adult resampled with noise (`datasets.resample_adult`, seed 0), `anon.cluster` with "
             f"`MDAV()` (blocks of at most {BLOCK_SIZE:,}), reading the records and grouping them.\n"
             "- Seed 001: `bench_clustering`'s policy (eight quasi-identifiers; occupation's three most frequent values "
             "at α 0.3, every value at 0.4; k = 25); NCP per record is `Clusters.information_loss` over the records; "
             "a block is halved only where both halves meet the policy as one cluster, so a block may stay larger "
             f"than its size; the large run resamples Adult as above, default blocks "
             f"({semisupervised.BLOCK_SIZE:,}).")
    common.report("MDAV within blocks against exact MDAV", " ".join(["python benchmarks/bench_blocking.py",
                                                                     *sys.argv[1:]]),
                  f"{table}\n\n{large}\n\n{semi}", notes, [], load, args.output, None)
    return 0


def semi_table(con: duckdb.DuckDBPyConnection, block_sizes: list[int], rows: int) -> str:
    """Seed 001's clustering exactly and within blocks on Adult, then on ``rows`` resampled records by default."""
    anon = duckanon.connect(con, progress=common.progress)
    policy = clustering_policy("semi")
    datasets.load_adult(con, "semi_adult")
    datasets.resample_adult(con, rows, "semi_large", seed=0)
    table, exact = [], None
    for source, size in [*[("semi_adult", b) for b in [None, *block_sizes]],
                         ("semi_large", semisupervised.BLOCK_SIZE)]:
        common.progress(f"seed 001 on {source}, {'exact' if size is None else f'blocks of {size:,}'}")
        common.reset_peak_rss()
        started = time.perf_counter()
        clusters = anon.cluster(source, policy, SemiSupervisedClustering(block_size=size))
        seconds = time.perf_counter() - started
        loss = clusters.information_loss / len(clusters.groups)
        exact = loss if size is None else exact
        table.append([f"{len(clusters.groups):,}", "exact" if size is None else f"{size:,}",
                      len(record_blocks(clusters.records.space.points(), size, 25,
                                        splits=clusters.records.composition.splits)), f"{seconds:.1f}",
                      f"{clusters.count:,}", f"{loss:.4f}", f"{loss / exact:.3f}" if source == "semi_adult" else "–",
                      f"{common.peak_rss_mb():,.0f}"])
    return common.markdown_table(["records", "block size", "blocks", "anon.cluster s", "groups", "NCP per record",
                                  "against exact", "peak MB"], table)


if __name__ == "__main__":
    sys.exit(main())
