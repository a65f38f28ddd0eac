"""Seed 002 (Hu Yixiang, USTC "Data privacy" lab 1 report, 2021): Mondrian on Adult, LM and time against k.

    python experiments/seed002_mondrian.py     # ~2 min; prints the table, writes experiments/results/seed002_mondrian.md
                                               # and experiments/results/seed002_mondrian.png

The report's Mondrian table gives LM and run time for k = 10, 20, 40, 80, 160, 320 on ``adult.data`` (all 32,561
records).  Its quasi-identifiers are not listed for Mondrian; its Samarati experiment uses age, sex, race and
marital-status, and LM 2.88 at k = 320 (of at most 4) fits those four, so they are used here.  Its categorical
attributes were "converted to numbers, cut, and converted back": cut along an order of their values.

Configurations, each with ``anon.mondrian`` (strict unless said):

- ``order`` -- the report's setting: the 32,561 records; sex, race and marital-status cut along the alphabetical order
  of their values and shown as the set of values in a partition; age cut on its value and shown as ``[lo-hi]``;
- ``order, relaxed`` -- as ``order``, relaxed Mondrian;
- ``hierarchy`` -- the same records, the categorical attributes cut along ARX's hierarchies (bundled with duckanon)
  and shown as the partition's lowest common ancestor;
- ``hierarchy, relaxed`` -- as ``hierarchy``, relaxed Mondrian;
- ``8 QIs`` -- the benchmark's eight quasi-identifiers (adding education, native-country, workclass, occupation,
  along their hierarchies) on the same records; the last three have missing values, which stay NULL (a value of
  their own) unless a partition mixes them with others (``*``).

Per (configuration, k): LM (duckanon's ``loss``: per attribute the records' average loss, summed -- the report's
definition), recomputed with pandas from the published release as a check; DM, NCP and the average class size; the
partitions and rounds; the time of the partitioning itself, of the whole ``anon.mondrian`` call without writing
(reading the source, checking the policy, partitioning, measuring) -- medians of three runs -- and of one call that
also writes and verifies the release.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python experiments/seed002_mondrian.py` from a checkout
    sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import pandas as pd  # noqa: E402
from sqlglot import exp  # noqa: E402

import duckanon  # noqa: E402
from duckanon.engine import as_engine  # noqa: E402
from duckanon import Hierarchy, KAnonymity, Policy  # noqa: E402
from duckanon.sqlgen import build as sb  # noqa: E402
from duckanon.datasets import adult_hierarchy_dir, load_adult  # noqa: E402
from experiments.common import Progress, code_version, markdown_table, read_release  # noqa: E402

KS = (10, 20, 40, 80, 160, 320)
#: The report's Mondrian table: k -> (LM, Time(s)).
PAPER = {10: (0.77, 0.42), 20: (0.93, 0.31), 40: (1.15, 0.30), 80: (1.46, 0.25), 160: (1.99, 0.22),
         320: (2.88, 0.22)}
SEED_QUASI = ("age", "sex", "race", "marital-status")
EIGHT_QUASI = ("sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation")
TABLE = "adult_all"
REPEAT = 3
#: name -> (quasi-identifiers, cut categories along an order (else their hierarchy), relaxed)
CONFIGS = {
    "order": (SEED_QUASI, True, False),
    "order, relaxed": (SEED_QUASI, True, True),
    "hierarchy": (SEED_QUASI, False, False),
    "hierarchy, relaxed": (SEED_QUASI, False, True),
    "8 QIs": (EIGHT_QUASI, False, False),
}


def hierarchy(attribute: str) -> Hierarchy:
    return Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{attribute}.csv", name=attribute)


def setting(con, quasi, ordered: bool) -> tuple[dict, dict]:
    """(the policy's quasi-identifiers, the orders): age numeric; the others along an order or a hierarchy."""
    qis, orders = {}, {}
    for q in quasi:
        if q == "age":
            qis[q] = None
        elif ordered:
            qis[q] = None
            values = as_engine(con).rows(exp.select(sb.col(q)).from_(sb.table(TABLE)).distinct().order_by(sb.col(q)))
            orders[q] = [v for (v,) in values]
        else:
            qis[q] = hierarchy(q)
    return qis, orders


def release_lm(released: pd.DataFrame, source: pd.DataFrame, quasi, styles: dict[str, str]) -> float:
    """LM recomputed with pandas from the published values: ``[lo-hi]`` over the source's age range, a set's
    values over the attribute's distinct values, an ancestor's leaves over the hierarchy's, ``*`` 1, NULL 0."""
    total = 0.0
    for q in quasi:
        shown = released[q]
        if styles[q] == "range":
            bounds = shown.str.strip("[]").str.split("-", expand=True).astype(float)
            loss = (bounds[1] - bounds[0]) / (source[q].max() - source[q].min())
        elif styles[q] == "set":
            domain = source[q].nunique()
            loss = shown.str.strip("{}").str.split(",").map(len).sub(1) / (domain - 1)
        else:
            tree = hierarchy(q)
            leaves: dict[str, int] = {}
            for level in range(tree.levels):
                for label, count in tree.leaves_under(level).items():
                    leaves.setdefault(label, count)
            loss = shown.map(leaves).sub(1) / (len(tree.rows) - 1)
        # '*' (NULL mixed with values) loses everything; NULL (a group of missing values only) nothing.
        total += float(loss.where(shown != "*", 1.0).where(shown.notna(), 0.0).mean())
    return total


def run(con, anon, progress: Progress, name: str, workdir: str) -> list[dict]:
    quasi, ordered, relaxed = CONFIGS[name]
    qis, orders = setting(con, quasi, ordered)
    source = as_engine(con).frame(exp.select(*[sb.col(q) for q in quasi]).from_(sb.table(TABLE)))
    rows = []
    for k in KS:
        progress.context = f"{name} k={k}"
        policy = Policy(quasi_identifiers=qis, models=[KAnonymity(k)], others="drop")
        walls, partition = [], []
        for _ in range(REPEAT):
            started = time.perf_counter()
            result = anon.mondrian(TABLE, policy, orders=orders, relaxed=relaxed)
            walls.append(time.perf_counter() - started)
            partition.append(result.partitioning.seconds)
        path = Path(workdir) / f"{name.replace(' ', '_').replace(',', '')}_k{k}.duckdb"
        started = time.perf_counter()
        published = anon.mondrian(TABLE, policy, path, orders=orders, relaxed=relaxed)
        with_release = time.perf_counter() - started
        metrics = published.metrics
        check = release_lm(read_release(path), source, quasi, published.styles)
        rows.append({"configuration": name, "k": k, "LM": metrics["loss"], "LM from the release (pandas)": check,
                     "DM": metrics["dm"], "NCP": metrics["ncp"], "average class size": metrics["average-class-size"],
                     "partitions": published.partitioning.partitions, "rounds": published.partitioning.rounds,
                     "partition (s)": statistics.median(partition), "mondrian (s)": statistics.median(walls),
                     "with release (s)": with_release, "released": published.release.records_out})
        progress.note(published.summary())
    progress.context = ""
    return rows


def table(results: pd.DataFrame) -> pd.DataFrame:
    """The report's table beside ours: LM and seconds per k and configuration."""
    rows = []
    for k in KS:
        row = {"k": k, "paper LM": PAPER[k][0], "paper time (s)": PAPER[k][1]}
        for name in CONFIGS:
            ours = results[(results["configuration"] == name) & (results["k"] == k)].iloc[0]
            row[f"LM: {name}"] = ours["LM"]
            row[f"time (s): {name}"] = ours["mondrian (s)"]
        rows.append(row)
    return pd.DataFrame(rows)


def plot(results: pd.DataFrame, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (lm_axis, time_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name in CONFIGS:
        part = results[results["configuration"] == name]
        lm_axis.plot(part["k"], part["LM"], marker="o", label=f"duckanon: {name}")
        time_axis.plot(part["k"], part["mondrian (s)"], marker="o", label=f"duckanon: {name}")
    lm_axis.plot(list(PAPER), [v[0] for v in PAPER.values()], "k--", marker="s", label="seed 002 (report)")
    time_axis.plot(list(PAPER), [v[1] for v in PAPER.values()], "k--", marker="s", label="seed 002 (report)")
    for axis, title, label in ((lm_axis, "LM against k", "LM (sum over attributes)"),
                               (time_axis, "Time against k", "seconds")):
        axis.set_xscale("log", base=2)
        axis.set_xticks(list(KS), [str(k) for k in KS])
        axis.set_xlabel("k")
        axis.set_ylabel(label)
        axis.set_title(title)
        axis.grid(True, alpha=0.3)
    lm_axis.legend(fontsize=8)
    figure.suptitle("Mondrian on Adult (32,561 records): seed 002's table and duckanon")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "experiments" / "results" / "seed002_mondrian.md")
    args = parser.parse_args(argv)
    progress = Progress(every=5.0)
    con = duckdb.connect()
    anon = duckanon.connect(con)
    load_adult(con, TABLE, complete=False)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="duckanon-seed002-mondrian-") as workdir:
        results = pd.DataFrame([row for name in CONFIGS for row in run(con, anon, progress, name, workdir)])
    total = time.perf_counter() - started
    mismatch = (results["LM"] - results["LM from the release (pandas)"]).abs().max()

    args.output.parent.mkdir(parents=True, exist_ok=True)
    plot_path = args.output.with_suffix(".png")
    plot(results, plot_path)
    summary = table(results)
    detail = results.drop(columns=["released"])
    sections = [
        "# Seed 002: Mondrian on Adult, LM and time against k",
        "",
        "Produced by `python experiments/seed002_mondrian.py` on all 32,561 Adult records (the report read the whole "
        "`adult.data`) with quasi-identifiers age, sex, race and marital-status (its Samarati attributes; `8 QIs` adds "
        "education, native-country, workclass and occupation). `order`: categories cut along the alphabetical order "
        "of their values and shown as sets, as the report converted them to numbers; `hierarchy`: cut along ARX's "
        "hierarchies and shown as the lowest common ancestor; age cut on its value, shown as `[lo-hi]`. Strict Mondrian "
        "unless `relaxed`. LM is duckanon's `loss` (per attribute the records' average loss, summed: the report's "
        "definition; nothing is suppressed). Times are medians of three `anon.mondrian` calls (reading the source, "
        "checking the policy, partitioning in SQL, measuring; no release written); the report's are its Python "
        "implementation's.",
        "",
        "## The report's table beside ours",
        "",
        markdown_table(summary),
        "",
        f"![LM and time against k]({plot_path.name})",
        "",
        "## Every run",
        "",
        "`partition (s)`: the SQL rounds alone; `with release (s)`: one call that also writes and verifies the "
        "release. `LM from the release (pandas)` recomputes LM from the published values (largest difference "
        f"{mismatch:.2e}).",
        "",
        markdown_table(detail),
        "",
        f"Total run time {total:.1f} s; duckanon {code_version()}.",
        "",
    ]
    args.output.write_text("\n".join(sections), encoding="utf-8")
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(summary.to_string(index=False))
        print()
        print(detail.to_string(index=False))
    print(f"\nwrote {args.output} and {plot_path}")
    if not math.isfinite(mismatch) or mismatch > 1e-9:
        print(f"LM recomputed from the releases differs by up to {mismatch}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
