"""Seed 001 (Yang, Yang, Zhang 2011, "Anonymous data publishing by semi-supervised clustering"): semi-supervised
(α,k) clustering against generalization-based (α,k)-anonymity on Adult, Figs 3-6.

    python experiments/seed001_clustering.py    # ~9 min; writes experiments/results/seed001_clustering.md and .png

The paper's setting (§4): the 30,162 complete Adult records; SemiAnony (its clustering) with α 0.3 for the highly
sensitive values and 0.4 for the others, GeneAnony (Wong et al.'s generalization-based (α,k)-anonymity) with α 0.3
for every value; information loss and time while |QI| grows from 1 to 8 at k = 25 (Figs 3 and 5) and while k grows at
|QI| = 7 (Figs 4 and 6).  The paper does not name the sensitive attribute, the order of the quasi-identifiers nor Sh;
we follow Wong et al.'s Adult setting, which the eight quasi-identifiers suggest: occupation sensitive, quasi-
identifiers age, workclass, education, marital-status, race, sex, native-country, salary-class (taken in that order),
and Sh = the three most frequent occupations (Prof-specialty, Craft-repair, Exec-managerial, 13.2-13.4 % each), where
α binds most.

- SemiAnony: ``anon.cluster(..., SemiSupervisedClustering())`` with ``AlphaKAnonymity(occupation, 0.3, k, Sh)`` and
  ``AlphaKAnonymity(occupation, 0.4, k)``; age is a number (its cluster's range), the others generalize to their
  lowest common ancestor in ARX's hierarchies.  Time: reading the records and clustering.
- GeneAnony: ``anon.search(..., strategy="optimal", metric="ncp")`` with ``AlphaKAnonymity(occupation, 0.3, k)`` and
  no suppression: the full-domain generalization of least NCP over ARX's hierarchies (Wong et al. search the same
  space with Apriori pruning; ours is exact), published.  Time: the search call (binding, encoding, search).  A second
  baseline, not in the paper, may suppress up to 2 % of the records.

Information loss is seed 001 §2.2's, computed alike for all from what they release: per record and attribute, a
number's interval width over the attribute's range in the data (73 years), a category's leaves under its generalized
value over all leaves (0 when not generalized), summed; a suppressed value (``*``) costs 1.  For GeneAnony's age the
interval is the span of the ages under the ARX label (``15-19`` holds 16-20: 4 years), clipped to the data's range.
Every clustering is re-checked by the core's SQL models over the recoded records and by pandas over the groups.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python experiments/seed001_clustering.py` from a checkout
    sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sqlglot import exp  # noqa: E402

import duckanon  # noqa: E402
from duckanon.engine import as_engine  # noqa: E402
from duckanon import AlphaKAnonymity, Hierarchy, Policy, SemiSupervisedClustering  # noqa: E402
from duckanon.sqlgen import build as sb  # noqa: E402
from duckanon.datasets import adult_hierarchy_dir, load_adult  # noqa: E402
from duckanon.utility.metrics import record_cost  # noqa: E402
from experiments.common import Progress, code_version, markdown_table, read_release  # noqa: E402

QUASI_IDENTIFIERS = ("age", "workclass", "education", "marital-status", "race", "sex", "native-country",
                     "salary-class")
SENSITIVE = "occupation"
HIGHLY_SENSITIVE = ("Prof-specialty", "Craft-repair", "Exec-managerial")
ALPHA_HIGH, ALPHA_OTHER, ALPHA_GENERAL = 0.3, 0.4, 0.3
K_FIXED, QI_FIXED = 25, 7
KS = (5, 10, 15, 20, 25, 30, 40, 50)
#: The share of records the second generalization baseline may suppress (seed 001's GeneAnony suppresses none).
SUPPRESSED = 0.02
RESULTS = ROOT / "experiments" / "results"


def hierarchies(quasi) -> dict[str, Hierarchy]:
    return {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv", name=q) for q in quasi}


def semi_policy(quasi, k: int) -> Policy:
    return Policy(quasi_identifiers=hierarchies(quasi), others="drop", models=[
        AlphaKAnonymity(SENSITIVE, ALPHA_HIGH, k, highly_sensitive=list(HIGHLY_SENSITIVE)),
        AlphaKAnonymity(SENSITIVE, ALPHA_OTHER, k)])


def general_policy(quasi, k: int, suppression: float) -> Policy:
    return Policy(quasi_identifiers=hierarchies(quasi), models=[AlphaKAnonymity(SENSITIVE, ALPHA_GENERAL, k)],
                  others="drop", suppression_limit=suppression)


def release_loss(released: pd.DataFrame, quasi, levels: dict[str, int], domain: tuple[float, float]) -> float:
    """Seed 001 §2.2's information loss of a full-domain release (see the module's docstring); a suppressed value
    (``*``) costs 1."""
    low, high = domain
    total = 0.0
    for q in quasi:
        hierarchy, level = hierarchies([q])[q], levels[q]
        if q == "age":
            ages = pd.DataFrame({"age": [float(row[0]) for row in hierarchy.rows],
                                 "label": [row[level] for row in hierarchy.rows]})
            spans = ages.groupby("label")["age"].agg(lambda a: min(a.max(), high) - max(a.min(), low)) / (high - low)
            cost = spans.to_dict()
        else:
            leaves = hierarchy.leaves_under(level)
            cost = {row[level]: record_cost(hierarchy, level, row[level], leaves)[1] for row in hierarchy.rows}
        cost["*"] = 1.0
        total += float(released[q].astype(str).map(cost).sum())
    return total


def pandas_groups_ok(frame: pd.DataFrame, numbering, groups: np.ndarray, k: int) -> bool:
    """The clusters by pandas: at least k records, Sh at most 0.3 and every value at most 0.4 of each."""
    numbered = frame.sort_values(list(numbering), na_position="first", kind="stable").reset_index(drop=True)
    shares = pd.crosstab(groups, numbered[SENSITIVE], normalize="index")
    sizes = np.bincount(groups)
    high = shares[[v for v in HIGHLY_SENSITIVE if v in shares.columns]]
    return bool((sizes >= k).all() and (high <= ALPHA_HIGH + 1e-12).all().all()
                and (shares <= ALPHA_OTHER + 1e-12).all().all())


def run_point(anon, frame, quasi, k: int, repeat: int, workdir: Path, progress: Progress) -> dict:
    """One point of the figures: SemiAnony and GeneAnony (without and with suppression), each timed as the best of
    ``repeat`` runs (the machine is shared)."""
    progress.context = f"|QI|={len(quasi)} k={k}"
    row = {"|QI|": len(quasi), "k": k}
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        clusters = anon.cluster("adult", semi_policy(quasi, k), SemiSupervisedClustering())
        seconds.append(time.perf_counter() - started)
    checked = clusters.check().satisfied and pandas_groups_ok(frame, clusters.numbering, clusters.groups, k)
    row.update({"SemiAnony IL": clusters.information_loss, "SemiAnony s": min(seconds), "clusters": clusters.count,
                "cluster sizes": f"{clusters.sizes.min()}-{clusters.sizes.max()}", "checked (SQL, pandas)": checked})
    domain = (float(frame["age"].min()), float(frame["age"].max()))
    for name, share in (("GeneAnony", 0.0), (f"GeneAnony {SUPPRESSED:.0%}", SUPPRESSED)):
        policy = general_policy(quasi, k, share)
        seconds = []
        for _ in range(repeat):
            started = time.perf_counter()
            result = anon.search("adult", policy, metric="ncp", strategy="optimal")
            seconds.append(time.perf_counter() - started)
        path = workdir / f"{name}-{len(quasi)}-{k}.duckdb".replace(" ", "").replace("%", "pct")
        release = anon.publish("adult", policy, result.levels, path)
        loss = release_loss(read_release(path), quasi, result.levels, domain)
        row.update({f"{name} IL": loss, f"{name} s": min(seconds), f"{name} suppressed": release.suppressed,
                    f"{name} levels": ",".join(str(result.levels[q]) for q in quasi)})
    cells = len(frame) * len(quasi)
    for name in ("SemiAnony", "GeneAnony", f"GeneAnony {SUPPRESSED:.0%}"):
        row[f"{name} IL per value"] = row[f"{name} IL"] / cells
    progress.note(", ".join(f"{name} IL {row[name + ' IL']:.0f} in {row[name + ' s']:.2f} s"
                            for name in ("SemiAnony", "GeneAnony", f"GeneAnony {SUPPRESSED:.0%}"))
                  + f"; checked {checked}")
    return row


def plot(by_qi: pd.DataFrame, by_k: pd.DataFrame, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 2, figsize=(11, 8))
    panels = [(by_qi, "|QI|", "IL", axes[0, 0], f"Fig. 3: information loss, k = {K_FIXED}"),
              (by_k, "k", "IL", axes[0, 1], f"Fig. 4: information loss, |QI| = {QI_FIXED}"),
              (by_qi, "|QI|", "s", axes[1, 0], f"Fig. 5: time, k = {K_FIXED}"),
              (by_k, "k", "s", axes[1, 1], f"Fig. 6: time, |QI| = {QI_FIXED}")]
    for frame, x, what, axis, title in panels:
        for method, marker in (("SemiAnony", "o"), ("GeneAnony", "s"), (f"GeneAnony {SUPPRESSED:.0%}", "^")):
            label = method if method != f"GeneAnony {SUPPRESSED:.0%}" else f"GeneAnony, ≤ {SUPPRESSED:.0%} suppressed"
            axis.plot(frame[x], frame[f"{method} {what}"], marker=marker, label=label)
        axis.set_title(title)
        axis.set_xlabel(x)
        axis.set_ylabel("information loss (seed 001 §2.2)" if what == "IL" else "seconds")
        axis.grid(alpha=0.3)
        axis.legend()
    figure.suptitle("Seed 001 on Adult (30,162 records): semi-supervised clustering vs generalization")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="runs per point; the best time is reported")
    parser.add_argument("--output", type=Path, default=RESULTS / "seed001_clustering.md")
    args = parser.parse_args(argv)
    progress = Progress()
    con = duckdb.connect()
    anon = duckanon.connect(con)
    load_adult(con, "adult")
    frame = as_engine(con).frame(exp.select(exp.Star()).from_(sb.table("adult")))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="seed001-") as tmp:
        by_qi = pd.DataFrame([run_point(anon, frame, QUASI_IDENTIFIERS[:m], K_FIXED, args.repeat, Path(tmp), progress)
                              for m in range(1, len(QUASI_IDENTIFIERS) + 1)])
        by_k = pd.DataFrame([run_point(anon, frame, QUASI_IDENTIFIERS[:QI_FIXED], k, args.repeat, Path(tmp), progress)
                             for k in KS])
    total = time.perf_counter() - started
    figure = args.output.with_suffix(".png")
    plot(by_qi, by_k, figure)
    suppressed = f"GeneAnony {SUPPRESSED:.0%}"
    qi_columns = ["|QI|", "SemiAnony IL", "GeneAnony IL", f"{suppressed} IL", "SemiAnony IL per value",
                  "GeneAnony IL per value", f"{suppressed} IL per value", "SemiAnony s", "GeneAnony s",
                  f"{suppressed} s", "clusters", "cluster sizes", "GeneAnony levels", f"{suppressed} levels",
                  f"{suppressed} suppressed", "checked (SQL, pandas)"]
    k_columns = ["k", *qi_columns[1:]]
    tables = {f"Figs 3 and 5: |QI| from 1 to 8, k = {K_FIXED}": by_qi[qi_columns],
              f"Figs 4 and 6: k from {KS[0]} to {KS[-1]}, |QI| = {QI_FIXED}": by_k[k_columns]}
    text = [
        "# Seed 001: semi-supervised (α,k) clustering vs generalization-based (α,k)-anonymity on Adult", "",
        "Produced by `python experiments/seed001_clustering.py"
        + (f" --repeat {args.repeat}`" if args.repeat != 2 else "`")
        + f". 30,162 Adult records; occupation sensitive; quasi-identifiers taken in the order "
        f"{', '.join(QUASI_IDENTIFIERS)}. SemiAnony: duckanon's SemiSupervisedClustering, α {ALPHA_HIGH} for Sh = "
        f"{{{', '.join(HIGHLY_SENSITIVE)}}} and {ALPHA_OTHER} for every value. GeneAnony: the optimal full-domain "
        f"generalization (least NCP) under (α,k)-anonymity with α {ALPHA_GENERAL} for every value, without "
        f"suppression (the paper's) and with at most {SUPPRESSED:.0%} of the records suppressed. IL is seed 001 §2.2's "
        "information loss of the release, summed over records and attributes (a suppressed value costs 1); 'per "
        "value' divides it by records × |QI|. Levels are ARX's hierarchy levels in the order of the quasi-identifiers. "
        f"Seconds: the best of {args.repeat} runs (this machine, 2 cores shared with other work): SemiAnony reading "
        "and clustering, GeneAnony the search (reading, encoding, searching).", ""]
    for title, table in tables.items():
        text += [f"## {title}", "", markdown_table(table, digits=3), ""]
    text += [f"![Figs 3-6]({figure.name})", "",
             f"Total run time {total:.0f} s; duckanon {code_version()}.", ""]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(text), encoding="utf-8")
    with pd.option_context("display.width", 250, "display.max_columns", None):
        for title, table in tables.items():
            print(f"\n{title}\n{table.to_string(index=False)}")
    print(f"\nwrote {args.output} and {figure}")
    return 0 if by_qi["checked (SQL, pandas)"].all() and by_k["checked (SQL, pandas)"].all() else 1


if __name__ == "__main__":
    sys.exit(main())
