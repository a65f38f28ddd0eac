"""How long verifying a release takes next to writing it: 1.19 million and 10 million IHIS-shaped records.

    python benchmarks/bench_verify.py [--cases ihis ihis-10m] [--formats duckdb parquet csv] [--data-dir DIR]

Per case the optimal k = 5 generalization (Loss, 5 % suppression) is searched once (the 10M case publishes the
levels found on 1.19M records when that case ran first: the same marginals, and the search is not what is timed); then, per format, one step after
the other in this process (each step's peak memory taken alone): **publish** (recode, check, suppress, write, read
back and verify: what a custodian waits for, the content digest included), **verify** (``duckanon.verify``: the
digest, every guarantee and the typed bounds recomputed from the file), the **digest** alone, and, for DuckDB
releases, the ``sql/`` macro ``anon_verify`` (plain SQL, no Python in the work) and the release's own view
``release_verification``.  The IHIS-shaped files are drawn by ``benchmarks/ihis/generate.py`` (1,193,504 rows, and
10,000,000 with the same marginals).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import duckdb

import common
from bench_search import IHIS_DIR, IHIS_QIS, ihis_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import duckanon  # noqa: E402
from duckanon import Hierarchy, KAnonymity, Policy  # noqa: E402
from duckanon.release.digest import content_digest  # noqa: E402
from duckanon.release.files import open_release  # noqa: E402
from duckanon.sqlgen import build as sb  # noqa: E402

CASES = {"ihis": 1_193_504, "ihis-10m": 10_000_000}
MACROS = HERE.parent / "sql" / "duckanon.sql"


def step(name: str, work):
    common.reset_peak_rss()
    wall, cpu, result = common.timed(work)
    peak = common.peak_rss_mb()
    common.progress(f"  {name}: {wall:.2f} s (cpu {cpu:.2f} s), peak {peak:,.0f} MB")
    return wall, peak, result


def run_case(case: str, formats: list[str], data_dir: Path, out_dir: Path, levels: dict | None
             ) -> tuple[list[list], dict]:
    rows = CASES[case]
    con = duckdb.connect()
    path = ihis_file(data_dir, rows)
    con.execute("CREATE TABLE ihis AS SELECT * FROM read_csv(?, delim=';', header=true, all_varchar=true)",
                [str(path)])
    hierarchies = {q: Hierarchy.from_arx_csv(IHIS_DIR / "hierarchies" / f"ihis_hierarchy_{q}.csv", name=q)
                   for q in IHIS_QIS}
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(5)], suppression_limit=0.05,
                    others="insensitive")
    anon = duckanon.connect(con)
    if levels is None:
        _, _, found = step(f"{case}: search", lambda: anon.search("ihis", policy, metric="loss"))
        common.progress(f"{case}: {found.summary()}")
        levels = found.levels
    table = []
    for form in formats:
        target = out_dir / f"{case}.{form}"
        write, write_peak, release = step(f"{case} {form}: publish",
                                          lambda: anon.publish("ihis", policy, levels, target, table="ihis"))
        check, check_peak, verification = step(f"{case} {form}: verify", lambda: duckanon.verify(target))
        assert verification.holds, verification.frame()

        def digest_only():
            reader, info = open_release(target)
            try:
                return content_digest(reader, sb.table(info["released_table"]))
            finally:
                reader.close()
        digest, _, _ = step(f"{case} {form}: digest", digest_only)
        macro = view = None
        if form == "duckdb":
            def in_sql(query: str):
                shell = duckdb.connect(str(target), read_only=True)
                try:
                    shell.execute(MACROS.read_text())
                    held = [r[-1] for r in shell.execute(query).fetchall()]
                finally:
                    shell.close()
                assert all(held), held
            macro, _, _ = step(f"{case} {form}: anon_verify", lambda: in_sql("SELECT * FROM anon_verify('ihis')"))
            view, _, _ = step(f"{case} {form}: release_verification",
                              lambda: in_sql("SELECT * FROM release_verification"))
        size = sum(p.stat().st_size for p in out_dir.glob(f"{case}.{form}*")) / 1e6
        table.append([case, f"{release.records_out:,}", form, f"{size:,.0f}", f"{write:.1f}", f"{check:.1f}",
                      f"{check / write:.2f}", f"{digest:.1f}", "-" if macro is None else f"{macro:.1f}",
                      "-" if view is None else f"{view:.1f}", f"{write_peak:,.0f}", f"{check_peak:,.0f}"])
    con.close()
    return table, levels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--formats", nargs="+", choices=["duckdb", "parquet", "csv"],
                        default=["duckdb", "parquet", "csv"])
    parser.add_argument("--data-dir", type=Path, help="where the IHIS-shaped files are generated (default: a "
                                                      "temporary folder)")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "verify.md")
    args = parser.parse_args(argv)
    load = common.load_at_start()
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = args.data_dir or Path(scratch)
        out_dir = Path(scratch) / "releases"
        out_dir.mkdir()
        rows, levels = [], None
        for case in args.cases:
            found, levels = run_case(case, args.formats, data_dir, out_dir, levels)
            rows += found
            for release in out_dir.iterdir():
                release.unlink()
    headers = ["case", "records", "format", "MB", "publish s", "verify s", "verify / publish", "digest s",
               "anon_verify s", "view s", "publish peak MB", "verify peak MB"]
    table = common.markdown_table(headers, rows)
    print(table)
    facts = common.machine_facts()
    common.write_text(args.output, f"# Verifying a release next to writing it\n\n`python benchmarks/bench_verify.py "
                                   f"{' '.join(argv or sys.argv[1:])}`\n\n{table}\n\nLoad average at start: {load:.2f}, "
                                   f"at end: {facts['load_average']}.\n\n{common.facts_markdown(facts)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
